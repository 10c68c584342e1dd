"""The stack-frame limit's ruling (graders.run.stack), without a GPU: which frames pass, the
boundary, and the sentence a student reads."""

from __future__ import annotations

from graders.run import stack

H200 = {"multiProcessorCount": 132, "maxThreadsPerMultiProcessor": 2048}
GIB = 1 << 30


def test_the_gpus_resident_threads_come_from_its_properties() -> None:
    assert stack.resident_threads(H200) == 270_336
    assert stack.resident_threads({}) == 0


def test_a_frame_that_reserves_more_than_the_limit_is_refused_with_the_sizes() -> None:
    said = stack.refusal({"matmul": 128 * 1024}, resident=270_336, limit_bytes=GIB)
    assert "128 KiB of local memory per thread" in said
    assert "270,336 on this GPU" in said and "33.0 GiB" in said
    assert "this lab's limit of 1.0 GiB" in said
    assert "`matmul`" not in said  # one kernel: no need to name it
    assert said.endswith("or in shared memory.")


def test_the_limit_itself_passes_and_a_byte_more_does_not() -> None:
    resident = 1000
    assert stack.refusal({"k": 4096}, resident=resident, limit_bytes=4096 * resident) == ""
    assert stack.refusal({"k": 4096}, resident=resident, limit_bytes=4096 * resident - 1)


def test_the_largest_frame_of_several_kernels_is_named() -> None:
    said = stack.refusal(
        {"scan": 64, "add": 64 * 1024}, resident=270_336, limit_bytes=GIB, several=True
    )
    assert "`add`" in said and "64 KiB" in said


def test_no_frame_or_no_known_threads_refuses_nothing() -> None:
    assert stack.refusal({"k": 0}, resident=270_336, limit_bytes=GIB) == ""
    assert stack.refusal({"k": 1 << 20}, resident=0, limit_bytes=GIB) == ""
    assert stack.refusal({}, resident=270_336, limit_bytes=GIB) == ""
