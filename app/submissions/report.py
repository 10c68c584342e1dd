"""What a grading stores of its run, beside its cases: one typed shape that the worker writes
(app.grading.record) and every reader uses (the submission's page and API, performance, the
retiming of a contended grading, the worker registry's GPU state).

Kept as JSON in `grading_jobs.report`; a report stored by an earlier version reads with the
fields it lacks at their defaults, and fields it had that this one does not are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from graders.results import GradeReport


class StoredGpu(BaseModel):
    """The GPU the run stage ran on, and its state at the timed section."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    arch: str = ""
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    driver: str = ""


class StoredFinding(BaseModel):
    """A compute-sanitizer or static finding, named for a student."""

    model_config = ConfigDict(extra="ignore")

    tool: str = ""
    kind: str = ""
    message: str = ""
    line: int | None = None
    count: int = 1


class StoredReport(BaseModel):
    """The run stage's extras of one grading job: its summary and error, findings, GPU, the
    seconds per stage, the kernel's output, the points by part, and staff's flags."""

    model_config = ConfigDict(extra="ignore")

    summary: str = ""
    error: str = ""
    findings: list[StoredFinding] = Field(default_factory=list)
    gpu: StoredGpu | None = None
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    stdout: str = ""
    correctness_points: float = 0.0
    performance_points: float = 0.0
    max_performance_points: float = 0.0
    sanitizer_penalty: float = 0.0
    flags: list[str] = Field(default_factory=list)
    # Other work overlapped its timed section: its performance points wait for a quiet GPU.
    performance_pending: bool = False
    # For staff: which work outside the GPU's lock overlapped the timed section ("": none).
    timing_contended: str = ""
    budget_spent: bool = False

    @classmethod
    def of(cls, report: GradeReport) -> StoredReport:
        """What the worker stores of the run stage's report."""
        return cls(
            summary=report.summary,
            error=report.error,
            findings=[StoredFinding(**f.to_dict()) for f in report.findings],
            gpu=StoredGpu(**report.gpu.to_dict()) if report.gpu else None,
            stage_seconds=dict(report.stage_seconds),
            stdout=report.stdout,
            correctness_points=report.correctness_points,
            performance_points=report.performance_points,
            max_performance_points=report.max_performance_points,
            sanitizer_penalty=report.sanitizer_penalty,
            flags=list(report.flags),
            performance_pending=report.performance_pending,
            timing_contended=report.timing_contended,
            budget_spent=report.budget_spent,
        )

    @classmethod
    def read(cls, stored: dict[str, Any] | None) -> StoredReport:
        """A stored report as its readers use it (an empty one before any run). A field an
        earlier version stored in another shape reads as its default, never as an error."""
        try:
            return cls.model_validate(stored or {})
        except ValidationError:
            kept = {}
            for name, value in (stored or {}).items():
                try:
                    cls.model_validate({name: value})
                except ValidationError:
                    continue
                kept[name] = value
            return cls.model_validate(kept)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def gpu_name(self) -> str:
        return self.gpu.name if self.gpu else ""
