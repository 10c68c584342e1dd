"""The sandbox contains what runs in it: each test makes a child misbehave one way."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.sandbox import zygotes
from graders.sandbox.isolation import CPU_CHILD_NICE, SANDBOX_USER_ENV, unprivileged_user
from graders.sandbox.runner import RAISED, SandboxLimits, network_isolation, run_sandboxed
from tests.ci import skip_unless_ci

# Each test runs with fresh children and with children forked from a zygote (conftest.py).
pytestmark = pytest.mark.usefixtures("child_kind")

TARGETS = "graders.sandbox.selftest_targets"
LIMITS = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)


def run(name: str, payload: dict | None = None, limits: SandboxLimits = LIMITS):
    return run_sandboxed(f"{TARGETS}:{name}", payload or {}, limits=limits)


def _alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (PID 1 here may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_echo_round_trips_the_payload_in_another_process(child_kind: str) -> None:
    payload = {"text": "héllo", "numbers": [1, 2.5, None], "nested": {"ok": True}}
    outcome = run("echo", payload)
    assert outcome.ok, outcome
    forked = [line for line in outcome.log if line.startswith("forked from the cpu zygote")]
    assert bool(forked) == (child_kind == "forked"), outcome.log
    assert outcome.reason == ""
    assert outcome.value is not None
    assert outcome.value["echo"] == payload
    assert outcome.value["pid"] != os.getpid()
    assert outcome.exit_code == 0 and outcome.signal is None and not outcome.timed_out


def test_timeout_kills_the_whole_process_group_including_a_grandchild() -> None:
    limits = SandboxLimits(wall_seconds=2, cpu_seconds=10, memory_mb=512)
    outcome = run("sleep_with_grandchild", limits=limits)
    assert not outcome.ok
    assert outcome.reason == "timeout" and outcome.timed_out
    assert outcome.message.startswith("Killed after 2 s")
    match = re.search(r"grandchild-pid=(\d+)", outcome.stdout)
    assert match, outcome.stdout
    grandchild = int(match.group(1))
    for _ in range(50):  # SIGKILL is delivered at once, but reparenting takes a moment
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild), "the grandchild survived the group kill"


def test_cpu_limit_stops_a_spinning_child() -> None:
    limits = SandboxLimits(wall_seconds=30, cpu_seconds=1, memory_mb=512)
    outcome = run("burn_cpu", limits=limits)
    assert outcome.reason == "resource_limit", outcome
    assert not outcome.timed_out
    assert "CPU time" in outcome.message


def test_memory_limit_stops_a_growing_child() -> None:
    limits = SandboxLimits(wall_seconds=30, cpu_seconds=20, memory_mb=256)
    outcome = run("allocate_memory", limits=limits)
    assert outcome.reason == "resource_limit", outcome
    assert "256 MiB of memory" in outcome.message


def test_file_size_limit_stops_a_big_write() -> None:
    limits = SandboxLimits(wall_seconds=30, cpu_seconds=20, memory_mb=512, max_file_size_mb=4)
    outcome = run("write_big_file", {"mb": 64}, limits=limits)
    assert outcome.reason == "resource_limit", outcome
    assert "4 MiB" in outcome.message


def test_stdout_is_capped_and_a_printed_result_is_not_believed() -> None:
    limits = SandboxLimits(wall_seconds=30, cpu_seconds=20, memory_mb=512, stdout_limit_bytes=4096)
    outcome = run("print_flood", {"lines": 2000}, limits=limits)
    assert outcome.ok, outcome
    assert outcome.value == {"real": True}
    assert outcome.stdout_truncated
    assert len(outcome.stdout.encode()) <= 4096
    assert '"forged": true' in outcome.stdout  # it was printed, and only printed


def test_a_child_that_prints_past_the_byte_limit_is_stopped_for_printing() -> None:
    limits = SandboxLimits(
        wall_seconds=60, cpu_seconds=30, memory_mb=512, print_limit_bytes=256 * 1024
    )
    outcome = run("print_steadily", {"size": 64 * 1024, "every_s": 0, "seconds": 60}, limits=limits)
    assert not outcome.ok and outcome.reason == "printing", (outcome.reason, outcome.log)
    assert not outcome.timed_out
    assert outcome.stdout_total > 256 * 1024
    assert outcome.message.startswith("Stopped for printing:")
    assert "256 KiB" in outcome.message and outcome.message.endswith(".")


def test_a_child_that_keeps_printing_past_the_time_limit_is_stopped_for_printing() -> None:
    limits = SandboxLimits(wall_seconds=60, cpu_seconds=30, memory_mb=512, print_limit_seconds=1)
    outcome = run("print_steadily", {"size": 100, "every_s": 0.01, "seconds": 60}, limits=limits)
    assert not outcome.ok and outcome.reason == "printing", (outcome.reason, outcome.log)
    assert "kept coming for more than 1 s" in outcome.message
    assert outcome.stdout_total < limits.print_limit_bytes


def test_quiet_between_bursts_of_printing_does_not_count_as_printing() -> None:
    limits = SandboxLimits(wall_seconds=60, cpu_seconds=30, memory_mb=512, print_limit_seconds=1)
    burst = {"stdout": "a line the kernel printed"}
    outcome = run(
        "scripted",
        {"actions": [burst, {"sleep": 1.5}, burst, {"sleep": 1.5}, burst, {"sleep": 1.5}, burst]},
        limits=limits,
    )
    assert outcome.ok, (outcome.reason, outcome.log)
    assert outcome.stdout.count("a line the kernel printed") == 4


def test_a_result_printed_on_stdout_alone_is_not_a_result() -> None:
    outcome = run("forge_on_stdout_only")
    assert not outcome.ok
    assert outcome.value is None
    assert outcome.reason == "bad_result"
    assert "forged" in outcome.stdout


def test_an_answer_that_is_not_json_is_a_bad_result() -> None:
    outcome = run("garbage_answer")
    assert not outcome.ok and outcome.reason == "bad_result"
    assert any("not JSON" in line for line in outcome.log)


def test_a_bug_in_our_code_is_internal_with_the_traceback_only_in_the_log() -> None:
    outcome = run("raise_error")
    assert outcome.reason == "internal"
    assert "Traceback" not in outcome.message and "ValueError" not in outcome.message
    assert "not your fault" in outcome.message
    assert any("selftest: a bug in the grader" in line for line in outcome.log)
    assert any("Traceback" in line for line in outcome.log)
    # Named where graders.run.stage.grader_bug reads it: the exception's class first.
    assert RAISED + "ValueError: selftest: a bug in the grader" in outcome.log


def test_a_crash_is_named_by_its_signal() -> None:
    outcome = run("crash")
    assert outcome.reason == "crashed"
    assert "SIGSEGV" in outcome.message
    assert outcome.signal is not None


def test_a_crash_is_not_blamed_on_the_memory_the_worker_had_when_it_forked() -> None:
    """A forked child's ru_maxrss starts at its parent's peak: a worker of 700 MiB must not
    make a crashed 30 MiB child read as past a 512 MiB limit."""
    script = (
        "import numpy as np\n"
        "held = np.ones(700 * 2**20 // 8)  # 700 MiB resident in the 'worker'\n"
        "from tests.graders.sandbox.test_runner import run\n"
        "crashed, big = run('crash'), run('allocate_memory')\n"
        "print(crashed.reason, big.reason, held.size > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    # a child that itself goes past the limit is still its own resource_limit
    assert done.stdout.split() == ["crashed", "resource_limit", "True"], done.stdout


def test_network_is_unreachable_inside_the_sandbox() -> None:
    flags, note = network_isolation()
    if not flags:
        skip_unless_ci(note)  # CI runs as root: a network namespace is always possible
    # A real listener on the host's loopback: reachable from here, not from the child.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        outcome = run("try_network", {"targets": [["127.0.0.1", port], ["192.0.2.1", 80]]})
    assert outcome.ok, outcome
    results = outcome.value["results"]
    assert set(results) == {f"127.0.0.1:{port}", "192.0.2.1:80"}
    assert all(result != "connected" for result in results.values()), results
    assert any("network isolated" in line for line in outcome.log)


def test_network_allowed_when_limits_say_so_is_logged_without_isolation() -> None:
    limits = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512, network=True)
    outcome = run("echo", {}, limits=limits)
    assert outcome.ok
    assert not any("network isolated" in line for line in outcome.log)


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELGRADER_SECRET_KEY", "do-not-leak-this")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nor-this")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    outcome = run("environment")
    assert outcome.ok, outcome
    env = outcome.value["env"]
    assert "do-not-leak-this" not in str(env) and "nor-this" not in str(env)
    assert "CUDA_VISIBLE_DEVICES" not in env  # only gpu=True children see the GPU settings
    assert env["LANG"] == "C.UTF-8"
    assert env["HOME"] != os.environ.get("HOME")
    # No BLAS thread per core: the sandbox user's process limit counts every child's threads.
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "4"  # idle BLAS threads sleep at once


def test_a_cpu_child_importing_numpy_starts_no_blas_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "64")  # the worker's own setting stays its own
    outcome = run("numpy_threads")
    assert outcome.ok, outcome
    assert outcome.value["threads"] == 1, outcome.value


def test_gpu_children_see_the_cuda_settings_but_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELGRADER_SECRET_KEY", "do-not-leak-this")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    outcome = run_sandboxed(f"{TARGETS}:environment", {}, limits=LIMITS, gpu=True)
    assert outcome.ok, outcome
    env = outcome.value["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "do-not-leak-this" not in str(env)
    # One BLAS thread, as for every child: `import numpy` starts no thread per core.
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "4"


def test_a_gpu_child_importing_numpy_starts_no_blas_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "64")
    outcome = run_sandboxed(f"{TARGETS}:numpy_threads", {}, limits=LIMITS, gpu=True)
    assert outcome.ok, outcome
    assert outcome.value["threads"] == 1, outcome.value


def test_gpu_children_take_the_workers_gpu_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from graders.gpu import gpu_key, lock_dir

    monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8c7a1d3e-1111-2222-3333-444455556666")
    outcome = run_sandboxed(f"{TARGETS}:environment", {}, limits=LIMITS, gpu=True)
    assert outcome.ok, outcome
    env = outcome.value["env"]
    assert env["KERNELGRADER_LOCK_DIR"] == str(lock_dir()) == str(tmp_path.resolve())
    assert env["KERNELGRADER_GPU_KEY"] == gpu_key() == "GPU-8c7a1d3e-1111-2222-3333-444455556666"


def test_working_directory_is_empty_private_and_removed() -> None:
    first = run("workdir_info")
    second = run("workdir_info")
    assert first.ok and second.ok
    assert first.value["entries"] == [] and second.value["entries"] == []
    assert first.value["mode"] == 0o700
    assert first.value["home"] == first.value["cwd"]
    assert first.value["cwd"] != second.value["cwd"]
    assert first.value["cwd"] != os.getcwd()
    assert not Path(first.value["cwd"]).exists()  # removed, with the file written in it


def test_cpu_children_drop_root_where_they_can() -> None:
    creds, note = unprivileged_user()
    outcome = run("identity")
    assert outcome.ok, outcome
    assert note in outcome.log  # the decision, either way, is in the log
    if creds is None and "cannot run" in note:
        # Where the checkout lies in a folder only root may enter (CI's clone may), nobody
        # cannot run its virtualenv's interpreter; the next test shows the drop with the
        # system's interpreter, and runs under CI.
        pytest.skip(note)
    if creds is None:
        skip_unless_ci(note)
    assert creds is not None
    assert outcome.value["uid"] == creds.uid and outcome.value["gid"] == creds.gid
    assert outcome.value["groups"] == []
    assert outcome.value["shadow"] != "readable"


def test_the_privilege_drop_with_an_interpreter_nobody_may_run(
    monkeypatch: pytest.MonkeyPatch, child_kind: str
) -> None:
    # The venv's interpreter may live under /root; the system one shows the drop itself works.
    system_python = Path("/usr/bin/python3")
    if os.geteuid() != 0:
        skip_unless_ci("the privilege drop needs root")
    if not system_python.exists():
        skip_unless_ci("the privilege drop's test needs the system's /usr/bin/python3")
    monkeypatch.setattr(sys, "executable", str(system_python))
    unprivileged_user.cache_clear()
    if child_kind == "forked":  # zygotes of that interpreter, as a worker running it has
        zygotes.disable()
        zygotes.enable()
    try:
        creds, note = unprivileged_user()
        if creds is None:
            skip_unless_ci(note)
        outcome = run("identity")
        network = run("try_network", {"targets": [["127.0.0.1", 9]]})
    finally:
        unprivileged_user.cache_clear()
        if child_kind == "forked":
            monkeypatch.undo()
            zygotes.disable()
            zygotes.enable()
    assert outcome.ok, outcome
    assert outcome.value["uid"] == creds.uid != 0
    assert outcome.value["shadow"] == "PermissionError"
    assert network.ok and "connected" not in str(network.value)  # namespace made before the drop


def test_each_child_leads_a_session_of_its_own_and_holds_only_its_channels() -> None:
    outcome = run("identity")
    assert outcome.ok, outcome
    me = outcome.value
    assert me["sid"] == me["pgid"] == me["pid"] == outcome.pid != os.getpid()
    # stdin, stdout, stderr, the request, answer and progress pipes and the lifeline, and
    # the listing's own descriptor: nothing of the worker's, or of a zygote's.
    assert len(me["open_fds"]) <= 8, me["open_fds"]


def test_gpu_children_keep_the_workers_user() -> None:
    outcome = run_sandboxed(f"{TARGETS}:identity", {}, limits=LIMITS, gpu=True)
    assert outcome.ok, outcome
    assert outcome.value["uid"] == os.geteuid()
    assert outcome.value["nice"] == os.nice(0)  # a timed section is not preempted


def test_cpu_children_yield_the_cpu_to_the_web_server_and_worker() -> None:
    # Compiles at a deadline must not starve requests where web and worker share a host.
    outcome = run("identity")
    assert outcome.ok, outcome
    assert outcome.value["nice"] == min(19, os.nice(0) + CPU_CHILD_NICE)
    # Its own session is its own scheduling group where the kernel has them; the group yields.
    if os.path.exists("/proc/self/autogroup"):
        assert outcome.value["autogroup"].endswith(f"nice {CPU_CHILD_NICE}"), outcome.value


def test_a_worker_with_many_open_files_still_gets_its_compiles_to_yield() -> None:
    # Until exec the child holds the worker's descriptors: more of them than the child's
    # open-files limit must not stop it from lowering its scheduling group.
    if not os.path.exists("/proc/self/autogroup"):
        pytest.skip("this kernel has no sched_autogroup")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(LIMITS.max_open_files + 8)]
    try:
        outcome = run("identity")
    finally:
        for fd in held:
            os.close(fd)
    assert outcome.ok, outcome
    assert outcome.value["autogroup"].endswith(f"nice {CPU_CHILD_NICE}"), outcome.value


def test_the_privilege_drop_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SANDBOX_USER_ENV, "")
    unprivileged_user.cache_clear()
    try:
        outcome = run("identity")
    finally:
        unprivileged_user.cache_clear()
    assert outcome.ok, outcome
    assert outcome.value["uid"] == os.geteuid()
    if os.geteuid() == 0:
        assert any("privilege drop off" in line for line in outcome.log)


def test_an_unknown_target_is_internal() -> None:
    outcome = run_sandboxed("graders.sandbox.selftest_targets:no_such_target", {}, limits=LIMITS)
    assert outcome.reason == "internal"
    assert any("no_such_target" in line for line in outcome.log)


def test_a_large_payload_travels_intact() -> None:
    blob = "x" * (3 * 1024 * 1024)  # far more than a pipe buffer holds: base64 cubins are big
    outcome = run("echo", {"blob": blob})
    assert outcome.ok, outcome
    assert outcome.value["echo"]["blob"] == blob


@pytest.mark.gpu
def test_cuda_works_under_the_gpu_limits() -> None:
    limits = SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=4096)
    outcome = run_sandboxed(f"{TARGETS}:cuda_probe", {"n": 1 << 20}, limits=limits, gpu=True)
    assert outcome.ok, (outcome.reason, outcome.stdout, outcome.log)
    assert outcome.value["sum"] == outcome.value["expected"]
    assert outcome.value["twice_ok"]


@pytest.mark.gpu
def test_a_spinning_kernel_is_killed_and_the_gpu_stays_usable() -> None:
    limits = SandboxLimits(wall_seconds=8, cpu_seconds=60, memory_mb=4096)
    outcome = run_sandboxed(f"{TARGETS}:cuda_spin", {}, limits=limits, gpu=True)
    assert outcome.reason == "timeout", (outcome.reason, outcome.stdout, outcome.log)
    assert "launched" in outcome.stdout
    after = run_sandboxed(
        f"{TARGETS}:cuda_probe", {}, limits=SandboxLimits(120, 60, 4096), gpu=True
    )
    assert after.ok, (after.reason, after.stdout, after.log)
    assert after.value["twice_ok"]
