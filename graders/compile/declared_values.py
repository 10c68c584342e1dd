"""Declared values (a tile width, a block size) read from the program NVRTC built.

The grader needs some of a submission's constants before it launches the kernel. It does not
evaluate the student's C++ for them: NVRTC's main file is a small generated wrapper that
includes the student's file (served from memory under the file's own name, so every message
and line number is the student's) and then defines, for each name it needs, a device constant
initialised from that name as it stands at the end of the student's file:

    #ifdef TILE_WIDTH                                   (a macro: its expansion)
    extern "C" __attribute__((device)) const long long <nonce>_v0 = (TILE_WIDTH); ...
    #else                                               (a constant at file scope, or nothing)
    namespace <nonce>_f0 { enum <nonce>_e0 { TILE_WIDTH }; } using namespace <nonce>_f0; ...
    extern "C" __attribute__((device)) const long long <nonce>_v0 = (::TILE_WIDTH); ...
    #endif

`::TILE_WIDTH` finds the student's own file-scope declaration where there is one (a qualified
name looks into a namespace a using-directive names only when the global scope has none), and
the wrapper's enumerator otherwise; a companion constant (`<nonce>_s0`) says which: 1 a macro,
2 a declared constant, 0 neither, 3 a value that is no whole number (a float), told apart by
overloads asked about in `sizeof` only (it works from C++03 on). The values are read from the
cubin's symbol table and `.nv.global.init` (`graders.compile.cubin.initial_values`), with no
GPU. A name that is no constant at all (`blockDim.x`, a type, a pointer) makes its probe fail
to compile; the pipeline compiles again without that probe (`failed_probes`), and the name is
"unreadable".

Why the student's text cannot change what the wrapper means:
- the wrapper includes the file instead of appending to it: translation phases 1 to 3 (line
  splices, comments, raw strings) and conditional groups end with a file, so an unterminated
  comment, raw string, `#if` or a trailing backslash in the file cannot reach the wrapper's
  lines (each is an error of the student's file, as it is alone);
- every name the wrapper declares carries a nonce made from a hash of the file, which the file
  cannot contain (a macro or variable of that name would change the hash);
- the C++ keywords and attribute words it uses are checked not to be macros (`#if
  defined(long) || ...`); where the file defines one, no probe is made and every value is
  "blocked" (the lab's default, with a note).

A macro is probed only where the grader's preprocessor view expands it within its budget
(`too_large_to_expand`): a name defined as 2^40 tokens would cost NVRTC the compile stage's
whole time limit.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graders.compile import work
from graders.compile.cexpr import EXPRESSION_STEPS, Expander, GiveUp
from graders.compile.cubin import CubinError, initial_values
from graders.compile.log import NO_LINE, first_error
from graders.compile.preprocess import Program

# NVRTC's name for the wrapper: one `safe_filename` never gives a student's file (its first
# character is no letter or digit), so the two can never be the same file.
WRAPPER_NAME = "_kernelgrader_declared.cu"
# The words the wrapper's own lines use; a file that defines one as a macro gets no probes.
_KEYWORDS = (
    "namespace", "enum", "using", "extern", "const", "long", "int", "unsigned", "double",
    "char", "sizeof", "__attribute__", "device",
)  # fmt: skip
# The whole-number types a value may have after its promotions (a `char`, a `bool` or an
# unscoped enumeration promotes to one of them).
_INTEGER_TYPES = ("int", "unsigned", "long", "unsigned long", "long long", "unsigned long long")
_WRAPPER_ERROR = re.compile(r"^(.+?)\((\d+)\): (?:catastrophic )?error", re.IGNORECASE)
# NVRTC runs at most this often for one file: with the probes, without those it refused
# (rarely needed), then the file alone.
MAX_PROBE_COMPILES = 3
MACRO, CONSTANT, ABSENT, NOT_WHOLE = "macro", "constant", "absent", "not_whole"
UNREADABLE, BLOCKED, TOO_LARGE = "unreadable", "blocked", "too_large"


@dataclass(frozen=True)
class Reading:
    """What the compiled program says of one name at the end of the student's file."""

    name: str
    state: str  # MACRO, CONSTANT, ABSENT, NOT_WHOLE, UNREADABLE, BLOCKED or TOO_LARGE
    value: int | None = None  # for MACRO and CONSTANT

    @property
    def known(self) -> bool:
        return self.state in (MACRO, CONSTANT)


@dataclass(frozen=True)
class Wrapper:
    """The generated main file, and which of its lines probe which name."""

    text: str
    nonce: str
    names: tuple[str, ...]
    lines: dict[int, str]  # line of the wrapper -> the name its probe reads


def nonce_for(source: str) -> str:
    """A prefix for the wrapper's names that the file cannot name: a hash of the file."""
    digest = hashlib.sha256(b"kernelgrader-declared\x00" + source.encode("utf-8", "replace"))
    return "kg" + digest.hexdigest()[:16]


def make_wrapper(header: str, names: Sequence[str], nonce: str) -> Wrapper:
    """The main file that includes `header` (the student's file) and probes each name."""
    attr = "__attribute__((device))"
    whole = " ".join(f"{attr} char (&{nonce}_i({t}))[1];" for t in _INTEGER_TYPES)
    lines = [
        f'#include "{header}"',
        "#if " + " || ".join(f"defined({word})" for word in _KEYWORDS),
        "#else",
        # Overloads only asked about in `sizeof`, never called: which one a value picks says
        # whether it is a whole number (`_i`), and whether it is the wrapper's own stand-in
        # (`_k`: the stand-in's enumeration type, else anything at all).
        f"{whole} {attr} char (&{nonce}_i(double))[2]; {attr} char (&{nonce}_i(long double))[2];",
        f"{attr} char (&{nonce}_k(...))[2];",
        f'extern "C" {attr} const int {nonce}_ok = 1;',
    ]
    probed: dict[int, str] = {}
    for i, name in enumerate(names):
        v, s = f"{nonce}_v{i}", f"{nonce}_s{i}"
        lines.append(f"#ifdef {name}")
        probed[len(lines) + 1] = name
        lines.append(
            f'extern "C" {attr} const long long {v} = ({name}); '
            f'extern "C" {attr} const int {s} = sizeof({nonce}_i({name})) == 1 ? 1 : 3;'
        )
        lines.append("#else")
        probed[len(lines) + 1] = name
        lines.append(
            f"namespace {nonce}_f{i} {{ enum {nonce}_e{i} {{ {name} }}; }} "
            f"using namespace {nonce}_f{i}; "
            f"{attr} char (&{nonce}_k({nonce}_f{i}::{nonce}_e{i}))[1]; "
            f'extern "C" {attr} const long long {v} = (::{name}); '
            f'extern "C" {attr} const int {s} = sizeof({nonce}_i(::{name})) != 1 ? 3 '
            f": sizeof({nonce}_k(::{name})) == 1 ? 0 : 2;"
        )
        lines.append("#endif")
    lines.append("#endif")
    return Wrapper("\n".join(lines) + "\n", nonce, tuple(names), probed)


def failed_probes(log: str, wrapper: Wrapper) -> set[str] | None:
    """The names whose probes NVRTC refused (errors on their lines of the wrapper); None when
    an error of the wrapper is on no probe's line (then no probe can be trusted)."""
    failed: set[str] = set()
    for line in log.split("\n"):
        work.add(len(line) + 1)
        header = _WRAPPER_ERROR.match(line[:400])
        if header is None or header.group(1) != WRAPPER_NAME:
            continue
        name = wrapper.lines.get(int(header.group(2)))
        if name is None:
            return None
        failed.add(name)
    return failed


def read_values(
    cubin: bytes, wrapper: Wrapper, *, unreadable: Sequence[str] = ()
) -> dict[str, Reading]:
    """Each probed name's reading from the cubin; `unreadable` names had their probes fail."""
    readings = {name: Reading(name, UNREADABLE) for name in unreadable}
    try:
        found = initial_values(cubin, wrapper.nonce)
    except CubinError:
        found = {}
    if f"{wrapper.nonce}_ok" not in found:  # a keyword the wrapper uses is a macro
        return {name: Reading(name, BLOCKED) for name in (*wrapper.names, *unreadable)}
    states = {0: ABSENT, 1: MACRO, 2: CONSTANT, 3: NOT_WHOLE}
    for i, name in enumerate(wrapper.names):
        value, state = found.get(f"{wrapper.nonce}_v{i}"), found.get(f"{wrapper.nonce}_s{i}")
        if value is None or state is None:
            readings[name] = Reading(name, UNREADABLE)
            continue
        kind = states.get(int.from_bytes(state, "little", signed=True), UNREADABLE)
        number = int.from_bytes(value, "little", signed=True)
        readings[name] = Reading(name, kind, number if kind in (MACRO, CONSTANT) else None)
    return readings


def too_large_to_expand(program: Program, name: str) -> bool:
    """Whether the macro `name` (as the grader's preprocessor view has it at the end of the
    file) does not expand within one expression's budget: NVRTC is then not asked to expand
    it. A name the view cannot know (defined under a condition it cannot evaluate) counts as
    one token, as do the names it leaves. The budget is the file's, shared by every
    expansion: once a bomb has spent it, no later name is asked of the compiler either."""
    budget = program.budget.share(EXPRESSION_STEPS)
    try:
        Expander(program.macro, budget).expand([name])
    except GiveUp:
        return True
    return False


# NVRTC as the pipeline calls it: (source, filename, options, headers) -> (ok, error, log, cubin).
Compile = Callable[[str, str, list[str], dict[str, str]], tuple[bool, str, str, bytes]]


@dataclass
class Compiled:
    """NVRTC's answer for the wrapper (or the file alone, where nothing is probed)."""

    ok: bool
    error: str
    log: str
    cubin: bytes
    seconds: float
    wrapper: Wrapper | None
    unreadable: list[str]

    @property
    def nonce(self) -> str | None:
        return self.wrapper.nonce if self.wrapper is not None else None

    def readings(self, too_large: Sequence[str]) -> dict[str, Reading]:
        found = {n: Reading(n, TOO_LARGE) for n in too_large}
        if self.wrapper is None:
            return found | {n: Reading(n, UNREADABLE) for n in self.unreadable}
        return found | read_values(self.cubin, self.wrapper, unreadable=self.unreadable)


def compile_with_probes(
    nvrtc: Compile,
    text: str,
    name: str,
    options: list[str],
    headers: dict[str, str],
    names: Sequence[str],
) -> Compiled:
    """`nvrtc` on the wrapper that includes the student's file `text`, served as
    `name`, and probes `names`. A probe NVRTC refuses (the name is no whole-number constant, a
    function) while the student's file compiles is left out and the program compiled once
    more; so is every probe where an error of the wrapper is on no probe's line."""
    started = time.perf_counter()
    nonce = nonce_for(text)
    pending = list(names)
    unreadable: list[str] = []
    for attempt in range(MAX_PROBE_COMPILES):
        if attempt == MAX_PROBE_COMPILES - 1:  # the last: the file alone, whatever is left
            unreadable += pending
            pending = []
        wrapper = make_wrapper(name, pending, nonce) if pending else None
        if wrapper is None:
            ok, error, log, cubin = nvrtc(text, name, options, headers)
        else:
            served = {**headers, name: text}
            ok, error, log, cubin = nvrtc(wrapper.text, WRAPPER_NAME, options, served)
        if ok or wrapper is None or _errors_of_the_file(log, name):
            break
        failed = failed_probes(log, wrapper)
        if failed == set():
            break  # not the probes' doing (an error with no file, NVVM's): the student's verdict
        gone = set(pending) if failed is None else failed
        unreadable += [n for n in pending if n in gone]
        pending = [n for n in pending if n not in gone]
    seconds = time.perf_counter() - started
    return Compiled(ok, error, log, cubin, seconds, wrapper, unreadable)


def _errors_of_the_file(log: str, name: str) -> bool:
    """Whether NVRTC reported an error in the student's file (or at its end, or its
    assembly): then the compile is the student's compile error, probes or not."""
    first = first_error(log, name)
    return first is not None and first[0] != NO_LINE
