"""Which queue a job goes to: compiling is for every worker, running for the right GPU model.

Timings, and so performance points, compare only on one GPU model, so a lab may name the model
its timings belong to. A model is matched word by word from the start of the GPU's name, with
"NVIDIA" and case ignored: "H100" is served by "NVIDIA H100 80GB HBM3" and "NVIDIA H100 PCIe";
"H100 PCIe" only by the latter. A worker listens on the queue of every such prefix of its own
GPU's name, so the broker routes a job to the workers that can serve it.
"""

from __future__ import annotations

import re

from app.jobs.celery_app import GPU_QUEUE

_WORD = re.compile(r"[a-z0-9]+")


def model_key(name: str) -> str:
    """A GPU model as a routing key: "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"; "" for any."""
    words = _WORD.findall(name.lower())
    if words[:1] == ["nvidia"]:
        words = words[1:]
    return "-".join(words)


def served_keys(gpu_name: str) -> list[str]:
    """The model keys a GPU of this name serves: "" (labs that name no model) and each prefix."""
    words = model_key(gpu_name).split("-") if model_key(gpu_name) else []
    return [""] + ["-".join(words[:n]) for n in range(1, len(words) + 1)]


def serves(gpu_name: str, required_key: str) -> bool:
    return required_key in served_keys(gpu_name)


def gpu_queue(required_key: str) -> str:
    """The queue of jobs that need a GPU of this model ("" : any GPU)."""
    return f"{GPU_QUEUE}.{required_key}" if required_key else GPU_QUEUE


def gpu_queues(gpu_name: str) -> list[str]:
    """Every GPU queue a worker with this GPU takes jobs from."""
    return [gpu_queue(key) for key in served_keys(gpu_name)]
