"""Saved real Nsight Compute reports, read with NVIDIA's ncu_report (a worker's extra)."""

from __future__ import annotations

import lzma
import os
from pathlib import Path
from typing import Any

import pytest

from graders.profile import extract

DATA = Path(__file__).parent / "data"
PROBE = DATA / "probe-transpose.ncu-rep.xz"
# Launches of the probe report (the others are CuPy's own kernels).
NAIVE, TILED, PADDED, REDUCE, HISTOGRAM = 3, 7, 11, 17, 21


@pytest.fixture(scope="session")
def reader() -> Any:
    found = extract.load_reader()
    if found is None:
        message = "NVIDIA's ncu-report is not installed (pip install 'kernelgrader[profile]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def probe_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reports") / "probe-transpose.ncu-rep"
    path.write_bytes(lzma.decompress(PROBE.read_bytes()))
    return path


@pytest.fixture(scope="session")
def probe(reader: Any, probe_report: Path) -> dict[str, Any]:
    """The probe report's summary, as the profiling child makes it."""
    return extract.summarize_report(probe_report, filename="probe-transpose.cu", reader=reader)


def launch(probe: dict[str, Any], index: int) -> dict[str, Any]:
    """One launch of the probe as a summary of its own."""
    return {"gpu": probe["gpu"], "launches": [probe["launches"][index]]}
