"""Lab specs: what an instructor writes in `reference_kernels/<lab-id>/lab.toml`, as checked data.

The format is `reference_kernels/SPEC_FORMAT.md`. These frozen dataclasses are what the rest of
the engine reads; `load_lab` refuses a malformed spec with a `LabSpecError` naming the file and
the field, so a typo fails when the lab is added, not when a student submits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from graders.spec.dtypes import ARRAY_DTYPES, DTYPE_BYTES, INTEGER_DTYPES, SCALAR_DTYPES
from graders.spec.expr import Number, evaluate, evaluate_int

PARAM_KINDS = ("in", "out", "inout", "scratch", "scalar")
BUILTIN_ORACLES = ("scale", "hadamard", "sum", "dot", "matmul", "conv1d", "conv2d")
PYTHON_ORACLE = "python"
BUILTIN_REFERENCES = ("cublas",)
DISTRIBUTIONS = ("uniform", "integers", "normal", "constant", "zeros")
# How an output is compared with the oracle's answer ("none": it is not; its properties or
# the lab's Python check judge it), and the built-in properties an output may be checked for.
COMPARISONS = ("elementwise", "sum", "none")
PROPERTIES = ("rows_sum_to_one", "sorted_permutation")
# What the profiling stage can find (graders.profile.findings), by name: a lab's [profile]
# table says which of them each reference shows, and a slow kernel's header which it expects.
PROFILE_FINDINGS = (
    "uncoalesced_global",
    "global_atomics",
    "bank_conflicts",
    "divergence",
    "occupancy",
    "small_grid",
    "stall",
    "throughput",
)
# Who may download a submission's Nsight Compute report file.
REPORT_DOWNLOADS = ("staff", "students")

LAB_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


class LabSpecError(ValueError):
    """A lab spec that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class InitSpec:
    """How an input array or a random scalar is generated (seeded by the grader).

    uniform: floats in [low, high) (an integer dtype: whole numbers low..high); integers:
    low..high inclusive; normal: mean + std * N(0, 1) (an integer dtype: rounded to nearest,
    then clipped to the dtype's range); constant: every element `value`; zeros: every element 0.
    """

    dist: str
    low: str | Number = 0
    high: str | Number = 0
    value: str | Number = 0  # dist = "constant"
    mean: str | Number = 0  # dist = "normal"
    std: str | Number = 1  # dist = "normal"

    @property
    def expressions(self) -> dict[str, str | Number]:
        """The fields this distribution uses, by name (each an expression of the sizes)."""
        keys = {
            "uniform": ("low", "high"),
            "integers": ("low", "high"),
            "normal": ("mean", "std"),
            "constant": ("value",),
            "zeros": (),
        }[self.dist]
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: an array (in/out/inout/scratch) or a scalar."""

    name: str
    kind: str
    dtype: str
    shape: tuple[str | Number, ...] = ()
    init: InitSpec | None = None
    value: str | Number | None = None  # scalars: an expression of the sizes
    # Outputs: how the output is compared with the oracle's answer (COMPARISONS), and the
    # built-in properties it must have (PROPERTIES); `of` is the input a sorted_permutation
    # output must be a permutation of.
    check: str = "elementwise"
    properties: tuple[str, ...] = ()
    of: str | None = None

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"

    @property
    def is_output(self) -> bool:
        return self.kind in ("out", "inout")

    @property
    def is_input(self) -> bool:
        return self.kind in ("in", "inout")

    @property
    def c_type(self) -> str:
        base = ARRAY_DTYPES[self.dtype] if self.is_array else SCALAR_DTYPES[self.dtype]
        if not self.is_array:
            return base
        return f"const {base}*" if self.kind == "in" else f"{base}*"

    def shape_for(self, names: Mapping[str, Number]) -> tuple[int, ...]:
        """The array's shape for one case (names from `LabSpec.sizes_for`)."""
        return tuple(
            evaluate_int(dim, names, what=f"{self.name}.shape[{i}]")
            for i, dim in enumerate(self.shape)
        )

    def numel_for(self, names: Mapping[str, Number]) -> int:
        count = 1
        for dim in self.shape_for(names):
            count *= dim
        return count

    def value_for(self, names: Mapping[str, Number]) -> Number:
        """A scalar's value for one case; only for scalars with `value` (not `init`)."""
        if self.value is None:
            raise ValueError(f"parameter {self.name} has no fixed value (it is generated)")
        value = evaluate(self.value, names)
        if self.dtype in INTEGER_DTYPES:
            return evaluate_int(self.value, names, what=f"{self.name}.value")
        return float(value)

    @property
    def needs_answer(self) -> bool:
        """An output compared with the oracle's answer (its elements, or its sum)."""
        return self.is_output and self.check != "none"


@dataclass(frozen=True)
class LaunchSpec:
    """One kernel launch: its geometry and, in order, what each kernel argument is bound to."""

    block: tuple[str | Number, ...]
    grid: tuple[str | Number, ...]
    shared_bytes: str | Number = 0
    # One entry per kernel parameter: a param's name, or an expression (multi-pass labs).
    args: tuple[str | Number, ...] = ()
    kernel: str = ""  # which of the lab's kernels this step launches (LabSpec.kernels)

    def geometry(
        self, names: Mapping[str, Number]
    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, shared_bytes) for one case, grid and block padded to three dims."""
        grid = [evaluate_int(g, names, what=f"grid[{i}]") for i, g in enumerate(self.grid)]
        block = [evaluate_int(b, names, what=f"block[{i}]") for i, b in enumerate(self.block)]
        grid += [1] * (3 - len(grid))
        block += [1] * (3 - len(block))
        shared = evaluate_int(self.shared_bytes, names, what="shared_bytes")
        return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), shared


@dataclass(frozen=True)
class BoundArg:
    """A launch argument resolved for a case: a param (array or scalar) or a computed scalar."""

    position: int
    dtype: str
    param: ParamSpec | None  # None: `value` was computed from an expression
    value: Number | None = None  # scalars with a fixed or computed value

    @property
    def is_array(self) -> bool:
        return self.param is not None and self.param.is_array


@dataclass(frozen=True)
class DeclareSpec:
    """A compile-time constant a submission may declare (`#define TILE_WIDTH 16`)."""

    name: str
    names: tuple[str, ...]
    default: int
    min: int
    max: int
    multiple_of: int | None = None
    power_of_two: bool = False

    def problem(self, value: int) -> str | None:
        """Why `value` is not one this lab accepts (a phrase), or None when it is."""
        if not self.min <= value <= self.max:
            return f"this lab accepts {self.name} from {self.min} to {self.max}"
        if self.multiple_of and value % self.multiple_of:
            return f"{self.name} must be a multiple of {self.multiple_of}"
        if self.power_of_two and (value < 1 or value & (value - 1)):
            return f"{self.name} must be a power of two (1, 2, 4, 8, ...)"
        return None


@dataclass(frozen=True)
class LiteralInput:
    """An input array's contents written by hand for one case, in the spec or in a file."""

    param: str
    values: tuple[Number, ...]  # row-major, as many as the array has elements
    shape: tuple[int, ...] | None  # the nesting of a literal list; None for a flat list or file
    source: str  # "literal", or the file's name in the lab folder


@dataclass(frozen=True)
class CaseSpec:
    name: str
    # Whole numbers, and floats for names that only float expressions use (e.g. alpha).
    sizes: dict[str, Number]
    points: float
    hidden: bool
    inputs: dict[str, LiteralInput] = field(default_factory=dict)


@dataclass(frozen=True)
class ReferenceSpec:
    name: str
    file: str | None = None  # a .cu file in the lab folder
    builtin: str | None = None  # "cublas"
    source: str = ""  # the file's text, read at load time

    @property
    def path_label(self) -> str:
        return self.file or f"builtin:{self.builtin}"


@dataclass(frozen=True)
class PythonOracleSpec:
    """The lab's trusted Python code (`oracle.py`): `expected(...)` and an optional `check(...)`.

    The loader only reads the file and checks, without running it, that it defines the
    functions with the arguments graders.run.python_oracle calls them with.
    """

    file: str
    source: str
    has_check: bool


@dataclass(frozen=True)
class ToleranceSpec:
    dtype: str
    atol: str | Number
    rtol: str | Number

    def for_case(self, names: Mapping[str, Number]) -> tuple[float, float]:
        return float(evaluate(self.atol, names)), float(evaluate(self.rtol, names))


@dataclass(frozen=True)
class LimitsSpec:
    compile_seconds: float = 20.0
    case_seconds: float = 10.0
    memory_mb: int = 4096
    # The GPU time one submission may take in all: its cases, the timed section and the
    # sanitizer (time spent waiting for the GPU's lock or memory does not count).
    gpu_seconds: float = 60.0
    # GPU memory a submission's global variables (`__device__` arrays) may take: loading the
    # module allocates it all, whether the kernel touches it or not.
    device_globals_mb: int = 1024
    # GPU memory a kernel's local memory (its per-thread frame) may reserve: the driver reserves
    # the frame for every thread the GPU can hold at once, so 8 GiB is about 31 KiB a thread on
    # an H100 or H200 (270,336 threads), far above an honest kernel's arrays and spills.
    local_memory_mb: int = 8192


@dataclass(frozen=True)
class TimingSpec:
    case: str
    budget_seconds: float = 3.0
    target_rse: float = 0.01
    min_reps: int = 10
    max_reps: int = 500
    # The GPU model these timings belong to ("H100"); "" : whichever GPU grades it.
    gpu_model: str = ""
    # A median this many times faster than the lab's fastest reference is flagged to staff.
    flag_speedup: float = 2.0


@dataclass(frozen=True)
class ProfileSpec:
    """The profiling stage for this lab: Nsight Compute on one case (graders.profile)."""

    enabled: bool = True
    # The case profiled; "" : the timed case (else the largest visible case).
    case: str = ""
    # Who may download the .ncu-rep file of a submission: "staff", or "students" too.
    report_download: str = "staff"
    # Reference name -> the access-pattern findings its profile shows (the ladder's rungs);
    # `lab check` on a GPU host fails a reference showing one not listed here.
    expect: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoringSpec:
    performance_points: float = 0.0
    baseline: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class WorkSpec:
    """What one run of a case does, to express a time as FLOP/s and GB/s: `flops` arithmetic
    operations and `bytes` of memory traffic (the least the kernel must move: each input read
    once, each output written once). Expressions of the case's sizes."""

    flops: str | Number
    bytes: str | Number

    def for_case(self, names: Mapping[str, Number]) -> tuple[float, float]:
        return float(evaluate(self.flops, names)), float(evaluate(self.bytes, names))


@dataclass(frozen=True)
class LabSpec:
    id: str
    title: str
    kernel: str  # the first of `kernels`: what single-kernel code reads
    folder: Path
    page_markdown: str
    params: list[ParamSpec]
    launches: list[LaunchSpec]
    declares: dict[str, DeclareSpec]
    derived: dict[str, str | Number]
    cases: list[CaseSpec]
    references: list[ReferenceSpec]
    expected_oracle: str
    tolerance: dict[str, ToleranceSpec]
    limits: LimitsSpec
    timing: TimingSpec | None
    scoring: ScoringSpec
    sanitizer: bool = False
    sanitizer_case: str | None = None
    requires: list[str] = field(default_factory=list)
    nvrtc_options: list[str] = field(default_factory=list)
    work: WorkSpec | None = None
    # Every extern "C" kernel a submission defines, in the order the spec names them; the
    # first is `kernel`. A launch names its kernel (LaunchSpec.kernel).
    kernels: tuple[str, ...] = ()
    python_oracle: PythonOracleSpec | None = None
    profile: ProfileSpec = field(default_factory=ProfileSpec)

    def __post_init__(self) -> None:
        if not self.kernels:
            object.__setattr__(self, "kernels", (self.kernel,))

    def for_references(self) -> LabSpec:
        """The lab as its references are compiled: trusted instructor code, so without
        `requires` (a rule for submissions that a tiled lab's naive baseline rightly breaks)."""
        return replace(self, requires=[])

    # Points a racecheck or synccheck finding costs; None: the sanitizer case fails instead.
    sanitizer_hazard_points: float | None = None
    # sha256 of lab.toml and every file it names (graders.spec.digest).
    digest: str = ""

    @property
    def correctness_points(self) -> float:
        return float(sum(case.points for case in self.cases))

    @property
    def max_score(self) -> float:
        return self.correctness_points + float(self.scoring.performance_points)

    @property
    def size_names(self) -> frozenset[str]:
        """The names every case binds (the union over the cases; validated equal)."""
        return frozenset(name for case in self.cases for name in case.sizes)

    @property
    def declaration_defaults(self) -> dict[str, int]:
        return {name: spec.default for name, spec in self.declares.items()}

    @property
    def signature(self) -> list[ParamSpec]:
        """The first kernel's parameters in order, as its first launch passes them."""
        return self.signature_of(self.kernel)

    def signature_of(self, kernel: str) -> list[ParamSpec]:
        """A kernel's parameters in order, as the first launch of that kernel passes them."""
        by_name = {p.name: p for p in self.params}
        first = next(launch for launch in self.launches if launch.kernel == kernel)
        return [by_name[str(a)] for a in first.args]

    def c_signature(self, kernel: str | None = None) -> str:
        """A kernel as a student declares it: `extern "C" __global__ void matmul(...)`."""
        name = kernel or self.kernel
        args = ", ".join(f"{p.c_type} {p.name}" for p in self.signature_of(name))
        return f'extern "C" __global__ void {name}({args})'

    def signature_sizes(self, kernel: str | None = None) -> list[int]:
        """Bytes of each kernel argument as the grader passes it (pointers are 8 bytes)."""
        return [
            8 if p.is_array else DTYPE_BYTES[p.dtype]
            for p in self.signature_of(kernel or self.kernel)
        ]

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"lab {self.id} has no parameter named {name!r}")

    @property
    def profile_case(self) -> CaseSpec:
        """The case the profiling stage runs: [profile] case, the timed case, or the largest
        visible one."""
        if self.profile.case:
            return self.case(self.profile.case)
        if self.timing is not None:
            return self.case(self.timing.case)
        visible = [c for c in self.cases if not c.hidden] or self.cases

        def elements(case: CaseSpec) -> int:
            names = self.sizes_for(case)
            return sum(p.numel_for(names) for p in self.params if p.is_array)

        return max(visible, key=elements)

    def case(self, name: str) -> CaseSpec:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"lab {self.id} has no case named {name!r}")

    def reference(self, name: str) -> ReferenceSpec:
        for r in self.references:
            if r.name == name:
                return r
        raise KeyError(f"lab {self.id} has no reference named {name!r}")

    def sizes_for(
        self, case: CaseSpec | str, declarations: Mapping[str, int] | None = None
    ) -> dict[str, Number]:
        """Every name an expression may use for this case: sizes, declarations, derived names.

        `declarations` are what the submission declared (CompileResult.declarations); the
        lab's defaults fill in the rest.
        """
        if isinstance(case, str):
            case = self.case(case)
        names: dict[str, Number] = dict(case.sizes)
        for name, spec in self.declares.items():
            given = (declarations or {}).get(name)
            names[name] = spec.default if given is None else int(given)
        for name, expr in self.derived.items():
            names[name] = evaluate(expr, names)
        return names

    def launch_args(self, launch: LaunchSpec | int, names: Mapping[str, Number]) -> list[BoundArg]:
        """Resolve one launch's arguments for a case: params by name, expressions evaluated."""
        if isinstance(launch, int):
            launch = self.launches[launch]
        by_name = {p.name: p for p in self.params}
        signature = self.signature_of(launch.kernel or self.kernel)
        bound: list[BoundArg] = []
        for i, entry in enumerate(launch.args):
            slot = signature[i]
            param = by_name.get(entry) if isinstance(entry, str) else None
            if param is not None:
                value = (
                    param.value_for(names)
                    if not param.is_array and param.value is not None
                    else None
                )
                bound.append(BoundArg(i, param.dtype, param, value))
                continue
            value = evaluate(entry, names)
            if slot.dtype in INTEGER_DTYPES:
                value = evaluate_int(entry, names, what=f"launch argument {i}")
            else:
                value = float(value)
            bound.append(BoundArg(i, slot.dtype, None, value))
        return bound
