"""docker/k8s: the worker Deployment and KEDA's ScaledObject, read as Kubernetes would read
them. Never applied to a cluster here (the README says so); these checks keep them true to the
service: one GPU a pod, the node's timing locks, and a figure /metrics really exports."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from graders.gpu import HOST_LOCK_DIRS

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "docker" / "k8s"


def manifest(name: str) -> dict[str, Any]:
    text = (K8S / name).read_text(encoding="utf-8")
    assert "NOT RUN HERE" in text
    (document,) = list(yaml.safe_load_all(text))
    return document


def test_a_worker_pod_asks_for_one_gpu_and_shares_the_nodes_timing_locks() -> None:
    deployment = manifest("worker-deployment.yaml")
    assert deployment["kind"] == "Deployment"
    pod = deployment["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["command"] == ["kernelgrader", "worker"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    lock = str(HOST_LOCK_DIRS[0])
    assert mounts["gpu-locks"] == lock
    assert volumes["gpu-locks"]["hostPath"]["path"] == lock
    assert pod["terminationGracePeriodSeconds"] >= 600


def test_keda_scales_the_deployment_on_the_figure_metrics_exports() -> None:
    deployment = manifest("worker-deployment.yaml")
    scaled = manifest("worker-scaledobject.yaml")
    assert scaled["kind"] == "ScaledObject"
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == "1"
    (metric,) = re.findall(r"kernelgrader_\w+", trigger["metadata"]["query"])
    # Exported by /metrics (tests/app/fleet/test_fleet_pages.py reads it there).
    assert f'"{metric}"' in (REPO / "app" / "fleet" / "metrics.py").read_text()
