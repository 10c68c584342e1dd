"""GPU-model routing keys: a lab's model is served by GPUs whose name starts with it."""

from __future__ import annotations

from app.jobs.routing import gpu_queue, gpu_queues, model_key, served_keys, serves


def test_model_keys_ignore_case_punctuation_and_the_vendor() -> None:
    assert model_key("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert model_key("  h100 80gb  HBM3 ") == "h100-80gb-hbm3"
    assert model_key("NVIDIA GeForce RTX 4090") == "geforce-rtx-4090"
    assert model_key("") == ""


def test_a_model_is_served_by_the_gpus_whose_name_starts_with_it_word_by_word() -> None:
    assert serves("NVIDIA H100 80GB HBM3", model_key("H100"))
    assert serves("NVIDIA H100 PCIe", model_key("NVIDIA H100"))
    assert serves("NVIDIA H100 PCIe", model_key("H100 PCIe"))
    assert not serves("NVIDIA H100 80GB HBM3", model_key("H100 PCIe"))
    # Whole words only: an H10 lab is not served by an H100.
    assert not serves("NVIDIA H100 PCIe", model_key("H10"))
    assert not serves("NVIDIA H200", model_key("H100"))
    # A lab that names no model is served by any GPU, even one of unknown name.
    assert serves("NVIDIA H200", "") and serves("", "")
    assert served_keys("") == [""]


def test_each_gpu_listens_on_the_queue_of_every_model_it_serves() -> None:
    assert gpu_queue("") == "grading.gpu"
    assert gpu_queue("h100") == "grading.gpu.h100"
    assert gpu_queues("NVIDIA H100 PCIe") == [
        "grading.gpu",
        "grading.gpu.h100",
        "grading.gpu.h100-pcie",
    ]
