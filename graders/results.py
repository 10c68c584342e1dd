"""What the grading engine hands back: plain dataclasses, JSON-ready through `to_dict`.

This is the contract between `graders/` and the service in `app/`: the worker stores these
fields and the pages show them. Keep it free of NumPy/CuPy types.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graders.spec import CaseSpec

# The line the run stage prints in place of what a kernel printed during a hidden case. The
# service shows a grading's output to students at once only where every hidden case that ran
# carries this line (the output was withheld at the source).
HIDDEN_OUTPUT_NOTE = "[grader] The output of hidden case {name} is not shown."


@dataclass
class CompileResult:
    """The outcome of compiling one submission with NVRTC."""

    ok: bool
    # One sentence for the student: "Compiled for sm_90.", "The compiler reported 2 errors.",
    # "No kernel named `matmul` was found; the file defines: matmul_kernel. ..."
    message: str
    log: str = ""  # the compiler's log, file names shown as the student's file name
    arch: str = ""  # e.g. "sm_90"
    kernel: str = ""  # the kernel's name as the lab expects it
    declarations: dict[str, int] = field(default_factory=dict)  # e.g. {"TILE": 16}
    warnings: list[str] = field(default_factory=list)  # static findings, e.g. barrier problem
    seconds: float = 0.0
    # Machine code for the run stage: a cubin for `arch`. Not stored in the database.
    cubin: bytes | None = field(default=None, repr=False)
    # Why compiling did not happen or stopped: "", "compile_error", "missing_kernel",
    # "wrong_signature", "bad_declaration", "missing_requirement",
    # "no_dynamic_shared_memory", "forbidden_include", "timeout", "resource_limit", "internal".
    reason: str = ""
    # From the cubin and ptxas: whether the kernel reads or writes shared memory at all, and
    # its static shared memory in bytes (dynamic shared memory is the launch's).
    uses_shared_memory: bool = False
    static_shared_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cubin")
        return d


@dataclass
class TimingStats:
    """Kernel time over repetitions, in milliseconds, L2 flushed before each."""

    median_ms: float
    min_ms: float
    mean_ms: float
    stdev_ms: float
    reps: int
    rse: float  # relative standard error of the mean
    # Where and when these repetitions ran: a reference's timing may be reused from an earlier
    # grading on the same GPU model and driver (then `reused` is true).
    measured_at: str = ""  # ISO 8601, UTC
    gpu: str = ""
    driver: str = ""
    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    reused: bool = False
    # A kept figure reused in a grading: the median of the repetitions that checked it there,
    # interleaved with the submission's, and how many there were.
    check_median_ms: float | None = None
    check_reps: int = 0
    # Beside a submission (a reference's entry in its case): the submission's median over this
    # one, and that ratio's spread (both medians' relative standard errors combined).
    ratio: float | None = None
    ratio_spread: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GpuInfo:
    name: str = ""
    arch: str = ""
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    driver: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Finding:
    """A compute-sanitizer or static finding, named for a student."""

    tool: str  # "memcheck", "racecheck", "synccheck", "static"
    kind: str  # "out_of_bounds", "shared_memory_race", "divergent_barrier", ...
    message: str  # plain words
    line: int | None = None  # line in the student's file
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CaseResult:
    """One test case of one grading: verdict, the evidence for it, and its timing."""

    name: str
    sizes: dict[str, int | float]  # whole numbers, and floats a float-only name takes
    hidden: bool
    passed: bool
    # "pass", "wrong_answer", "no_output", "out_of_bounds_write", "input_modified",
    # "timeout", "output_limit" (stopped for printing), "kernel_error", "launch_error",
    # "not_run", and from the sanitizer on its case:
    # "memory_error", "data_race", "divergent_barrier"
    verdict: str
    message: str  # a sentence: which index, expected and got, or what the kernel did
    points: float = 0.0
    max_points: float = 0.0
    seed: int = 0
    wrong_count: int = 0
    first_wrong_index: list[int] | None = None  # (row, col) for 2-D outputs
    expected: float | None = None
    got: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    timing: TimingStats | None = None
    reference_timings: dict[str, TimingStats] = field(default_factory=dict)

    @classmethod
    def unjudged(
        cls, case: CaseSpec, seed: int, message: str = "", verdict: str = "not_run"
    ) -> CaseResult:
        """A case's result before its judgement, or instead of one: its name, sizes and points,
        not passed."""
        return cls(
            name=case.name,
            sizes=dict(case.sizes),
            hidden=case.hidden,
            passed=False,
            verdict=verdict,
            message=message,
            max_points=float(case.points),
            seed=seed,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GradeReport:
    """Everything the run stage produced for one submission."""

    lab: str
    cases: list[CaseResult]
    score: float
    max_score: float
    correctness_points: float = 0.0
    performance_points: float = 0.0
    max_performance_points: float = 0.0
    # A sentence for the student, e.g. "All 9 cases passed; 1.8x faster than the naive kernel."
    summary: str = ""
    findings: list[Finding] = field(default_factory=list)
    gpu: GpuInfo | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)  # compile, run, sanitizer
    stdout: str = ""  # the kernel's printf output, capped
    # "" when the run finished; otherwise why it stopped early ("timeout", "crashed", ...).
    error: str = ""
    # For staff only (never shown to the student), e.g. a median far faster than every reference.
    flags: list[str] = field(default_factory=list)
    # Points the sanitizer's race or barrier findings cost (labs with sanitizer_hazard_points).
    sanitizer_penalty: float = 0.0
    # Reference timings measured in this grading, for the worker to keep: name -> TimingStats.
    measured_references: dict[str, TimingStats] = field(default_factory=dict)
    # For staff: work outside the GPU's lock overlapped every attempt at the timed section
    # (which processes); "" when none did. Its performance points are then held back.
    timing_contended: str = ""
    performance_pending: bool = False
    # The submission used the GPU time one grading may take (the lab's limits.gpu_seconds).
    budget_spent: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
