"""Lab specs: what an instructor writes in `reference_kernels/<lab-id>/lab.toml`, as checked data.

The format is `reference_kernels/SPEC_FORMAT.md`. These frozen dataclasses are what the rest of
the engine reads; `load_lab` refuses a malformed spec with a `LabSpecError` naming the file and
the field, so a typo fails when the lab is added, not when a student submits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from graders.spec.expr import Number, evaluate, evaluate_int

# dtype name -> C type, for arrays and for scalars.
ARRAY_DTYPES: dict[str, str] = {
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
}
SCALAR_DTYPES: dict[str, str] = {
    "int32": "int",
    "uint32": "unsigned int",
    "float32": "float",
    "float64": "double",
}
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
}
FLOAT_DTYPES = frozenset({"float32", "float64"})
PARAM_KINDS = ("in", "out", "inout", "scratch", "scalar")
BUILTIN_ORACLES = ("scale", "hadamard", "sum", "dot", "matmul", "conv1d", "conv2d")
BUILTIN_REFERENCES = ("cublas",)

LAB_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


class LabSpecError(ValueError):
    """A lab spec that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class InitSpec:
    """How an input array or a random scalar is generated (seeded by the grader)."""

    dist: str  # "uniform" (floats in [low, high)), "integers" (low..high inclusive), "constant"
    low: str | Number = 0
    high: str | Number = 0
    value: str | Number = 0  # for dist = "constant"


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: an array (in/out/inout/scratch) or a scalar."""

    name: str
    kind: str
    dtype: str
    shape: tuple[str | Number, ...] = ()
    init: InitSpec | None = None
    value: str | Number | None = None  # scalars: an expression of the sizes
    check: str = "elementwise"  # outputs: "elementwise" or "sum"

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
        if self.dtype in ("int32", "uint32"):
            return evaluate_int(self.value, names, what=f"{self.name}.value")
        return float(value)


@dataclass(frozen=True)
class LaunchSpec:
    """One kernel launch: its geometry and, in order, what each kernel argument is bound to."""

    block: tuple[str | Number, ...]
    grid: tuple[str | Number, ...]
    shared_bytes: str | Number = 0
    # One entry per kernel parameter: a param's name, or an expression (multi-pass labs).
    args: tuple[str | Number, ...] = ()

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


@dataclass(frozen=True)
class CaseSpec:
    name: str
    sizes: dict[str, int]
    points: float
    hidden: bool


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


@dataclass(frozen=True)
class TimingSpec:
    case: str
    budget_seconds: float = 3.0
    target_rse: float = 0.01
    min_reps: int = 10
    max_reps: int = 500
    # A median this many times faster than the lab's fastest reference is flagged to staff.
    flag_speedup: float = 2.0


@dataclass(frozen=True)
class ScoringSpec:
    performance_points: float = 0.0
    baseline: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class LabSpec:
    id: str
    title: str
    kernel: str
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
        """The kernel's parameters in order, as the first launch passes them."""
        by_name = {p.name: p for p in self.params}
        return [by_name[str(a)] for a in self.launches[0].args]

    def c_signature(self) -> str:
        """The kernel as a student declares it: `extern "C" __global__ void matmul(...)`."""
        args = ", ".join(f"{p.c_type} {p.name}" for p in self.signature)
        return f'extern "C" __global__ void {self.kernel}({args})'

    def signature_sizes(self) -> list[int]:
        """Bytes of each kernel argument as the grader passes it (pointers are 8 bytes)."""
        return [8 if p.is_array else DTYPE_BYTES[p.dtype] for p in self.signature]

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"lab {self.id} has no parameter named {name!r}")

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
        signature = self.signature
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
            if slot.dtype in ("int32", "uint32"):
                value = evaluate_int(entry, names, what=f"launch argument {i}")
            else:
                value = float(value)
            bound.append(BoundArg(i, slot.dtype, None, value))
        return bound
