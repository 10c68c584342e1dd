"""Shortcut probes: kernels that do less than the whole work, which a lab must fail.

A lab is weak when a kernel that skips work still passes: one that sums half the input and adds
the distribution's mean for the rest, one that reads every other element and counts it twice,
or one whose answer depends on the sizes only. `lab check` builds such kernels from the lab's
own reference: the reference's kernel becomes a `__device__` function, and every `const T*`
parameter bound to a lab input reads through `KgIn<T>`, a small class that answers
`p[i]` with

- `constant`: the input's mean in this case (so the answer is f(E[x]), the best constant),
- `half`: p[i] for even flat indices, the mean for odd ones (half the work plus an estimate),
- `sampled`: p[i & ~1] (every other element read, each counted twice),

where i is the element's flat index in the whole array (pointer arithmetic such as
`x + row * cols` keeps it: `KgIn` carries its offset). The mean is the case's own, looked up
from the launch's integer arguments, since a student reads the distribution on the lab page.
A kernel that the lab launches several times per run with different arguments (array-sum's
two passes) learns which launch it is from a counter the last block of each launch advances.

A reference that reads its inputs in ways the class cannot follow (`&src[i]`, `__ldg`,
passing the pointer to a helper) gives a ProbeError; the next reference is tried. A lab may
also hold hand-written probes in `probes/*.cu`, each starting with `// shortcut: <what it
does>`; they are run and judged the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graders.compile.source_text import blank_comments
from graders.run.host_dtypes import host_dtype, narrow
from graders.spec import CaseSpec, LabSpec, ParamSpec
from graders.spec.dtypes import ARRAY_DTYPES, FLOAT_DTYPES, INT_RANGES, SCALAR_DTYPES
from graders.spec.expr import Number, evaluate

PROBE_KINDS = ("constant", "half", "sampled")
_MODES = {"raw": 0, "constant": 1, "half": 2, "sampled": 3}
WHAT = {
    "constant": (
        "a constant answer (every input read as its distribution's mean, so the answer depends "
        "on the sizes only)"
    ),
    "half": (
        "half the work plus an estimate (every other element of each input read, the rest "
        "taken as the distribution's mean)"
    ),
    "sampled": "sampled work (every other element of each input read and counted twice)",
}
PROBES_FOLDER = "probes"
_SHORTCUT_HEADER = re.compile(r"^//\s*shortcut:\s*(?P<what>\S.*?)\s*$")
# A 16-bit float is held and passed as its bits (the grader serves no cuda_fp16.h).
_STORAGE = {**ARRAY_DTYPES, "float16": "unsigned short", "bfloat16": "unsigned short"}
_PREFIX = "kg_"

PREAMBLE = r"""// A shortcut probe `lab check` generated from the reference {reference}: {what}.
// It must fail the lab: a pass means the lab's data or tolerance cannot tell this shortcut
// from the whole work.
#define KG_PROBE {mode}
template <typename KgT>
struct KgIn {{
    const KgT* kg_p;
    long long kg_off;
    int kg_mode;
    KgT kg_mean;
    __device__ __forceinline__ KgT operator[](long long i) const
    {{
        const long long g = kg_off + i;
        if (kg_mode == 1) return kg_mean;
        if (kg_mode == 2) return (g & 1) ? kg_mean : kg_p[g];
        if (kg_mode == 3) return kg_p[g & ~1LL];
        return kg_p[g];
    }}
    __device__ __forceinline__ KgT operator*() const {{ return (*this)[0]; }}
    __device__ __forceinline__ KgIn operator+(long long i) const
    {{
        KgIn q = *this;
        q.kg_off += i;
        return q;
    }}
    __device__ __forceinline__ KgIn operator-(long long i) const
    {{
        KgIn q = *this;
        q.kg_off -= i;
        return q;
    }}
}};
__device__ unsigned int kg_epoch;
__device__ unsigned int kg_blocks_done;
// Which of the run's launches this is: the last block of every launch advances kg_epoch, and
// the next launch starts only after it, so every block of one launch reads the same value.
__device__ __forceinline__ unsigned int kg_launch_index(unsigned int per_run)
{{
    return *(volatile unsigned int*)&kg_epoch % per_run;
}}
__device__ __forceinline__ void kg_launch_end()
{{
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {{
        __threadfence();
        const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
        if (atomicAdd(&kg_blocks_done, 1u) == blocks - 1u) {{
            atomicExch(&kg_blocks_done, 0u);
            __threadfence();
            atomicAdd(&kg_epoch, 1u);
        }}
    }}
}}
"""


class ProbeError(ValueError):
    """A reference the probe generator cannot wrap; the message says why, in a phrase."""


@dataclass(frozen=True)
class Probe:
    kind: str  # one of PROBE_KINDS, or "hand-written"
    what: str  # the shortcut, as a phrase
    source: str
    origin: str  # the reference it was made from, or the probe's file

    @property
    def filename(self) -> str:
        return f"probe-{self.kind}.cu" if self.kind in PROBE_KINDS else Path(self.origin).name

    @property
    def label(self) -> str:
        if self.kind in PROBE_KINDS:
            return f"probe {self.kind}"
        return f"probe {PROBES_FOLDER}/{self.filename}"


# ---------------------------------------------------------------------------------------------
# What an input holds in a case: its mean, as the probe reads it.


def data_mean(lab: LabSpec, param: ParamSpec, case: CaseSpec) -> float:
    """The mean of an input's data in a case: of the hand-written values, or of its
    distribution (an integer dtype's normal is clipped to the dtype's range)."""
    literal = case.inputs.get(param.name)
    if literal is not None:
        return float(np.mean(np.asarray(literal.values, dtype=np.float64)))
    init = param.init
    if init is None:
        return 0.0
    names = lab.sizes_for(case)
    e = {k: float(evaluate(v, names)) for k, v in init.expressions.items()}
    if init.dist == "zeros":
        return 0.0
    if init.dist == "constant":
        return e["value"]
    if init.dist == "normal":
        if param.dtype in INT_RANGES:
            low, high = INT_RANGES[param.dtype]
            return min(max(e["mean"], low), high)
        return e["mean"]
    return (e["low"] + e["high"]) / 2


def stored_mean(param: ParamSpec, mean: float) -> Any:
    """The mean as one element of the input's host data (bfloat16 as bits)."""
    if param.dtype in FLOAT_DTYPES:
        return narrow(np.asarray([mean], dtype=np.float64), param.dtype)[0]
    low, high = INT_RANGES[param.dtype]
    whole = int(np.clip(np.rint(mean), low, high))
    return np.array(whole, dtype=host_dtype(param.dtype))[()]


def _c_literal(param: ParamSpec, mean: float) -> str:
    """The mean as a C expression of the input's storage type."""
    value = stored_mean(param, mean)
    storage = _STORAGE[param.dtype]
    if param.dtype in ("float16", "bfloat16"):
        bits = int(np.asarray(value).view(np.uint16)) if param.dtype == "float16" else int(value)
        return f"(unsigned short){bits}u"
    if param.dtype == "float32":
        return f"{float(value).hex()}f"
    if param.dtype == "float64":
        return float(value).hex()
    return f"({storage}){int(value)}ll"


def probe_inputs(
    lab: LabSpec, case: CaseSpec, arrays: Mapping[str, np.ndarray], kind: str
) -> dict[str, np.ndarray]:
    """The NumPy twin of what a generated probe reads from the lab's inputs in one case (its
    launches of other arrays read them whole): for tests and the tolerance bench."""
    out = dict(arrays)
    for p in lab.params:
        if p.kind != "in" or p.name not in arrays or not p.is_array:
            continue
        data = np.asarray(arrays[p.name])
        flat = data.reshape(-1)
        mean = stored_mean(p, data_mean(lab, p, case))
        if kind == "constant":
            got = np.full_like(flat, mean)
        elif kind == "half":
            got = flat.copy()
            got[1::2] = mean
        elif kind == "sampled":
            got = flat[np.arange(flat.size) & ~1]
        else:
            raise ValueError(f"unknown probe kind {kind!r}")
        out[p.name] = got.reshape(data.shape)
    return out


# ---------------------------------------------------------------------------------------------
# Generating a probe from a reference.


def _matching(view: str, start: int, open_ch: str, close_ch: str) -> int:
    """The index of the bracket closing the one at `start` (view: comments blanked)."""
    depth = 0
    for i in range(start, len(view)):
        if view[i] == open_ch:
            depth += 1
        elif view[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise ProbeError(f"an unbalanced {open_ch!r}")


def _split_params(view: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the parameters between the parentheses at start and end."""
    spans, depth, begin = [], 0, start + 1
    for i in range(start + 1, end):
        ch = view[i]
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "," and depth == 0:
            spans.append((begin, i))
            begin = i + 1
    if view[begin:end].strip():
        spans.append((begin, end))
    return spans


_POINTER_PARAM = re.compile(
    r"^\s*(?:const\s+)?(?P<type>(?:unsigned\s+|signed\s+)?(?:long\s+long|\w+))\s*(?:const\s*)?"
    r"\*\s*(?:const\s*)?(?:__restrict__\s*)?(?P<name>[A-Za-z_]\w*)\s*$"
)
# A local pointer to const data with an initialiser: `const float* in = x + offset;`. It
# becomes `auto`, so a pointer computed from a wrapped input stays wrapped.
_CONST_POINTER_LOCAL = re.compile(
    r"\bconst\s+(?:unsigned\s+|signed\s+)?(?:long\s+long|\w+)\s*\*\s*(?:__restrict__\s*)?"
    r"(?=[A-Za-z_]\w*\s*=[^=])"
)
_DIRECTIVE = re.compile(r"^[ \t]*#[^\n]*", re.M)
_HEAD_TOKENS = re.compile(r'\bextern\s+"C"|\b__global__\b|\b__launch_bounds__\s*\(')


@dataclass(frozen=True)
class _Definition:
    head: tuple[int, int]  # from the statement before it to the name
    name: tuple[int, int]
    params: list[tuple[int, int]]
    body: tuple[int, int]  # braces included


def _find_kernel(source: str, view: str, kernel: str) -> _Definition:
    for m in re.finditer(rf"\b{re.escape(kernel)}\s*\(", view):
        open_at = m.end() - 1
        close_at = _matching(view, open_at, "(", ")")
        after = view[close_at + 1 :].lstrip()
        if not after.startswith("{"):
            continue  # a declaration or a call
        body_at = len(view) - len(after)
        # The declaration starts after the last statement, block or directive line before it.
        head_start = max(view.rfind(ch, 0, m.start()) for ch in ";}{") + 1
        for directive in _DIRECTIVE.finditer(view, head_start, m.start()):
            head_start = directive.end()
        if "__global__" not in view[head_start : m.start()]:
            raise ProbeError(f"the definition of {kernel} does not say __global__ before its name")
        body_end = _matching(view, body_at, "{", "}")
        return _Definition(
            (head_start, m.start()),
            (m.start(), m.start() + len(kernel)),
            _split_params(view, open_at, close_at),
            (body_at, body_end + 1),
        )
    raise ProbeError(f"it defines no kernel named {kernel}")


@dataclass
class _Edits:
    """Replacements in the reference's text, applied from the end."""

    items: list[tuple[int, int, str]]

    def apply(self, text: str) -> str:
        for start, end, new in sorted(self.items, reverse=True):
            text = text[:start] + new + text[end:]
        return text


def _head_edits(source: str, view: str, span: tuple[int, int]) -> list[tuple[int, int, str]]:
    """`extern "C" __global__ __launch_bounds__(..)` -> `__device__`."""
    out = []
    start, end = span
    for m in _HEAD_TOKENS.finditer(source, start, end):
        if view[m.start()] != source[m.start()]:
            continue  # in a comment
        text = m.group()
        if text == "__global__":
            out.append((m.start(), m.end(), "__device__"))
        elif text.startswith("__launch_bounds__"):
            close = _matching(view, m.end() - 1, "(", ")")
            out.append((m.start(), close + 1, ""))
        else:
            out.append((m.start(), m.end(), ""))
    return out


def _wrapped_positions(lab: LabSpec, kernel: str) -> set[int]:
    """Positions of a kernel's parameters that some launch binds to an input array."""
    out = set()
    for launch in lab.launches:
        if (launch.kernel or lab.kernel) != kernel:
            continue
        for i, entry in enumerate(launch.args):
            param = _param_named(lab, entry)
            if param is not None and param.is_array and param.kind == "in":
                out.add(i)
    return out


def _param_named(lab: LabSpec, entry: str | Number) -> ParamSpec | None:
    if not isinstance(entry, str):
        return None
    return next((p for p in lab.params if p.name == entry), None)


def _reference_edits(lab: LabSpec, source: str) -> tuple[str, dict[str, list[str]]]:
    """The reference with every kernel that reads an input turned into a `__device__`
    function `kg_ref_<kernel>` whose input parameters are `KgIn<T>`. Returns the text and,
    per wrapped kernel, the element type of each parameter (None where not wrapped)."""
    view = blank_comments(source, blank_strings=True)
    edits: list[tuple[int, int, str]] = []
    wrapped: dict[str, list[str]] = {}
    for kernel in lab.kernels:
        positions = _wrapped_positions(lab, kernel)
        if not positions:
            continue
        d = _find_kernel(source, view, kernel)
        if len(d.params) != len(lab.signature_of(kernel)):
            raise ProbeError(f"{kernel} takes {len(d.params)} parameters, not the lab's")
        types: list[str] = []
        for i, (start, end) in enumerate(d.params):
            if i not in positions:
                types.append("")
                continue
            m = _POINTER_PARAM.match(view[start:end])
            if m is None:
                raise ProbeError(
                    f"parameter {i + 1} of {kernel} ({' '.join(source[start:end].split())}) is "
                    "not a plain pointer"
                )
            types.append(m.group("type"))
            edits.append((start, end, f" KgIn<{m.group('type')}> {m.group('name')}"))
        wrapped[kernel] = types
        edits.extend(_head_edits(source, view, d.head))
        edits.append((d.name[0], d.name[1], f"{_PREFIX}ref_{kernel}"))
        body_start, body_end = d.body
        for m in _CONST_POINTER_LOCAL.finditer(view, body_start, body_end):
            edits.append((m.start(), m.end(), "auto "))
    return _Edits(edits).apply(source), wrapped


def _c_type(param: ParamSpec) -> str:
    if not param.is_array:
        return SCALAR_DTYPES[param.dtype]
    base = _STORAGE[param.dtype]
    return f"const {base}*" if param.kind == "in" else f"{base}*"


def _key_positions(lab: LabSpec, launch: int) -> list[int]:
    """The integer scalar arguments of a launch that tell the cases apart (not random ones)."""
    out = []
    for i, entry in enumerate(lab.launches[launch].args):
        param = _param_named(lab, entry)
        if param is not None and (param.is_array or param.value is None):
            continue
        dtype = (
            param.dtype if param is not None else lab.signature_of(_kernel(lab, launch))[i].dtype
        )
        if dtype in INT_RANGES:
            out.append(i)
    return out


def _kernel(lab: LabSpec, launch: int) -> str:
    return lab.launches[launch].kernel or lab.kernel


def _mean_functions(
    lab: LabSpec, declarations: Mapping[str, int], launch: int, position: int, storage: str
) -> tuple[str, str, list[str]]:
    """A device function that gives the mean of the input at `position` of `launch` for the
    case the launch's integer arguments name; its call, and notes on ambiguous cases."""
    param = _param_named(lab, lab.launches[launch].args[position])
    assert param is not None
    keys = _key_positions(lab, launch)
    signature = lab.signature_of(_kernel(lab, launch))
    name = f"{_PREFIX}mean_{launch}_{position}"
    rows: list[tuple[tuple[int, ...], str, str]] = []
    for case in lab.cases:
        names = lab.sizes_for(case, declarations)
        bound = lab.launch_args(launch, names)
        key = tuple(int(bound[i].value or 0) for i in keys)
        rows.append((key, _c_literal(param, data_mean(lab, param, case)), case.name))
    notes = []
    seen: dict[tuple[int, ...], tuple[str, str]] = {}
    for key, literal, case_name in rows:
        if key in seen and seen[key][0] != literal:
            notes.append(
                f"cases {seen[key][1]} and {case_name} launch {_kernel(lab, launch)} with the "
                f"same sizes, so the probe reads {param.name} as {seen[key][1]}'s mean in both"
            )
        seen.setdefault(key, (literal, case_name))
    args = ", ".join(f"{_c_type(signature[i])} a{i}" for i in keys)
    lines = [f"__device__ __forceinline__ {storage} {name}({args})", "{"]
    distinct = {literal for _, literal, _ in rows}
    if len(distinct) > 1:
        for key, (literal, _) in seen.items():
            test = " && ".join(
                f"a{i} == ({_c_type(signature[i])}){v}ll" for i, v in zip(keys, key, strict=True)
            )
            lines.append(f"    if ({test or 'true'}) return ({storage}){literal};")
    lines.append(f"    return ({storage}){rows[0][1]};")
    lines.append("}")
    call = f"{name}({', '.join(f'{_PREFIX}a{i}' for i in keys)})"
    return "\n".join(lines) + "\n", call, notes


def _wrapper(
    lab: LabSpec,
    kernel: str,
    types: list[str],
    declarations: Mapping[str, int],
    per_run: int,
    ordinals: list[tuple[int, int]],
) -> tuple[str, list[str]]:
    """The probe's kernel: the lab's signature, calling kg_ref_<kernel> with wrapped inputs.
    `ordinals` are (launch index in the lab, ordinal among the run's wrapped launches)."""
    signature = lab.signature_of(kernel)
    params = ", ".join(f"{_c_type(p)} {_PREFIX}a{i}" for i, p in enumerate(signature))
    helpers, notes = [], []
    body = []
    counted = per_run > 1
    if counted:
        body.append(f"    const unsigned int kg_l = kg_launch_index({per_run}u);")
    args = []
    for i, _ in enumerate(signature):
        if not types[i]:
            args.append(f"{_PREFIX}a{i}")
            continue
        storage = types[i]
        mode, mean = "0", f"({storage})0"
        # Later launches first, so the first launch's choice is the outermost default.
        for launch, ordinal in reversed(ordinals):
            bound = _param_named(lab, lab.launches[launch].args[i])
            if bound is None or not bound.is_array or bound.kind != "in":
                continue
            text, call, more = _mean_functions(lab, declarations, launch, i, storage)
            helpers.append(text)
            notes.extend(more)
            if counted:
                mode = f"(kg_l == {ordinal}u ? KG_PROBE : {mode})"
                mean = f"(kg_l == {ordinal}u ? {call} : {mean})"
            else:
                mode, mean = "KG_PROBE", call
        args.append(f"KgIn<{storage}>{{{_PREFIX}a{i}, 0, {mode}, {mean}}}")
    body.append(f"    {_PREFIX}ref_{kernel}({', '.join(args)});")
    if counted:
        body.append("    kg_launch_end();")
    text = (
        "".join(helpers)
        + f'extern "C" __global__ void {kernel}({params})\n{{\n'
        + "\n".join(body)
        + "\n}\n"
    )
    return text, notes


def probe_source(
    lab: LabSpec, reference_file: str, source: str, kind: str, declarations: Mapping[str, int]
) -> tuple[str, list[str]]:
    """The probe of `kind` built from one reference's source; ProbeError if it cannot be."""
    body, wrapped = _reference_edits(lab, source)
    if not wrapped:
        raise ProbeError("no kernel of the lab reads an input array")
    runs = [
        (li, _kernel(lab, li)) for li in range(len(lab.launches)) if _kernel(lab, li) in wrapped
    ]
    per_run = len(runs)
    several = len({k for _, k in runs}) < per_run
    tail, notes = [], []
    for kernel, types in wrapped.items():
        ordinals = [(li, o) for o, (li, k) in enumerate(runs) if k == kernel]
        text, more = _wrapper(lab, kernel, types, declarations, per_run if several else 1, ordinals)
        tail.append(text)
        notes.extend(more)
    head = PREAMBLE.format(reference=reference_file, what=WHAT[kind], mode=_MODES[kind])
    return head + "\n" + body.rstrip() + "\n\n" + "\n".join(tail), sorted(set(notes))


def generated_probes(
    lab: LabSpec, reference: str, declarations: Mapping[str, int]
) -> tuple[list[Probe], list[str]]:
    """The probes of every kind built from one reference file (its declarations as compiled),
    and notes on them; ProbeError when the reference cannot be wrapped."""
    ref = next(r for r in lab.references if r.file == reference)
    built = [
        (kind, *probe_source(lab, reference, ref.source, kind, declarations))
        for kind in PROBE_KINDS
    ]
    notes = sorted({n for _, _, ns in built for n in ns})
    return [Probe(kind, WHAT[kind], text, reference) for kind, text, _ in built], notes


def hand_written_probes(folder: Path) -> tuple[list[Probe], list[str]]:
    """`probes/*.cu` in the lab folder, each with its `// shortcut:` line; and problems."""
    out, problems = [], []
    for path in sorted((folder / PROBES_FOLDER).glob("*.cu")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{PROBES_FOLDER}/{path.name}: cannot be read ({exc})")
            continue
        what = next(
            (m.group("what") for m in map(_SHORTCUT_HEADER.match, text.splitlines()[:20]) if m),
            None,
        )
        if what is None:
            problems.append(
                f"{PROBES_FOLDER}/{path.name}: has no `// shortcut: <what it skips>` line in its "
                "first 20 lines"
            )
            continue
        out.append(Probe("hand-written", what, text, f"{PROBES_FOLDER}/{path.name}"))
    return out, problems


# ---------------------------------------------------------------------------------------------
# Judging a probe's grading.

ADVICE = (
    "Make the part a kernel skips impossible to estimate (zero-mean inputs, e.g. init = "
    '{ dist = "uniform", low = -1.0, high = 1.0 }, whose unread part has an expected value of '
    "0 and a spread far above the tolerance) and set the tolerance from the error of an honest "
    'float evaluation (SPEC_FORMAT.md, "Tolerances"), not looser.'
)


@dataclass(frozen=True)
class CaseOutcome:
    name: str
    passed: bool
    verdict: str
    message: str


def judge_probe(lab: LabSpec, probe: Probe, cases: list[CaseOutcome]) -> tuple[str, str]:
    """(status, sentence) for one probe's grading: `fail` where the lab lets the shortcut
    through (every case, or the timed case), `warn` where the probe failed only for another
    reason than a wrong answer, else `ok`."""
    caught = [c for c in cases if not c.passed and c.verdict == "wrong_answer"]
    failed = [c for c in cases if not c.passed]
    timed = lab.timing.case if lab.timing else None
    weak = f"The lab {lab.id} is weak: {probe.what}"
    if not failed:
        return "fail", (
            f"{weak} passes all {len(cases)} cases, so its data or tolerance cannot tell this "
            f"shortcut from the whole work. {ADVICE}"
        )
    timed_outcome = next((c for c in cases if c.name == timed), None)
    if timed_outcome is not None and timed_outcome.passed:
        points = (
            f" and earn its {lab.scoring.performance_points:g} performance points"
            if lab.scoring.performance_points
            else ""
        )
        return "fail", (
            f"{weak} passes the timed case {timed} (it fails only "
            f"{', '.join(c.name for c in failed)}): a kernel that does the whole work on the "
            f"other cases and takes this shortcut on {timed} would be timed as if it did it "
            f"all{points}. {ADVICE}"
        )
    if not caught:
        verdicts = ", ".join(sorted({c.verdict for c in failed}))
        first = failed[0]
        return "warn", (
            f"{probe.what} fails only with {verdicts} (first: {first.name}: {first.message}), "
            "never with a wrong answer, so the shortcut itself was not judged: the probe broke "
            "before its answer could be compared"
        )
    where = f", the timed case {timed} among them" if timed_outcome is not None else ""
    return "ok", (
        f"{probe.what} fails {len(caught)} of {len(cases)} cases with a wrong answer{where} "
        f"(first: {caught[0].name}: {caught[0].message})"
    )
