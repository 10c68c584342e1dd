"""The stored report: what the worker writes is what every reader reads back, and a report
stored by an earlier version reads with defaults where it lacks or mis-shapes a field."""

from __future__ import annotations

from app.submissions.report import StoredReport
from graders.results import Finding, GpuInfo, GradeReport


def test_what_the_worker_stores_reads_back_the_same() -> None:
    report = GradeReport(
        lab="scale",
        cases=[],
        score=7.5,
        max_score=10,
        summary="All 3 cases passed.",
        findings=[Finding("racecheck", "shared_memory_race", "a race on tile", line=12)],
        gpu=GpuInfo(name="NVIDIA H100 80GB HBM3", sm_clock_mhz=1980, temperature_c=47),
        stage_seconds={"compile": 0.4, "run": 1.2},
        stdout="hello\n",
        flags=["fast"],
        performance_pending=True,
        timing_contended="pid 12 (python)",
    )
    stored = StoredReport.read(StoredReport.of(report).to_json())
    assert stored.summary == "All 3 cases passed."
    assert [f.model_dump() for f in stored.findings] == [f.to_dict() for f in report.findings]
    assert stored.gpu is not None and stored.gpu.model_dump() == report.gpu.to_dict()  # type: ignore[union-attr]
    assert stored.gpu_name == "NVIDIA H100 80GB HBM3"
    assert (stored.stage_seconds, stored.stdout, stored.flags) == (
        {"compile": 0.4, "run": 1.2},
        "hello\n",
        ["fast"],
    )
    assert stored.performance_pending and stored.timing_contended == "pid 12 (python)"


def test_an_earlier_versions_report_reads_with_defaults() -> None:
    assert StoredReport.read(None) == StoredReport()
    assert StoredReport.read({}).gpu_name == ""
    older = {
        "summary": "2 of 3 cases passed.",
        "gpu": {"name": "NVIDIA A100"},  # before the clocks were kept
        "timing_contended": False,  # a flag before it named the work
        "dropped_since": [1, 2],
    }
    stored = StoredReport.read(older)
    assert stored.summary == "2 of 3 cases passed."
    assert stored.gpu_name == "NVIDIA A100" and stored.gpu.sm_clock_mhz is None  # type: ignore[union-attr]
    assert stored.timing_contended == ""  # the mis-shaped field reads as its default
