"""Make NVRTC's log safe and useful to show a student.

Defence in depth behind the include policy: a diagnostic about any file other than the
student's is replaced by a one-line note (so no other file's text can reach the page), a
source line the compiler echoes is kept only if it is a line of the student's own file, and the
whole log is capped. Before any cap, `prioritized` puts errors first and remarks (a `#pragma
message`'s text) last, each entry cut to a size, so a megabyte of pragma text cannot push the
real error out of the log. Runs in the compile child; each line is read a bounded number of
times.
"""

from __future__ import annotations

import re

from graders.compile import work

MAX_LOG_CHARS = 20_000
MAX_DIAGNOSTICS = 100
# One diagnostic of the raw log, its echoed source and notes included, is cut to this.
MAX_ENTRY_CHARS = 8_000
# NVVM writes "Error:" with a capital (`s.cu(1): Error: Formal parameter space overflowed`).
_HEADER = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>(?i:catastrophic error|error|warning|remark"
    r"|note))(?P<rest>.*)$"
)
_END_OF_SOURCE = re.compile(
    r"^At end of source: (?P<severity>(?i:catastrophic error|error|warning))"
)
# Errors in inline assembly come from ptxas, numbered by lines of the generated PTX.
_PTX_INPUT = re.compile(
    r"^ptxas application ptx input, line \d+; (?P<severity>error|fatal|warning)\s*:\s*(?P<rest>.*)$"
)
# An error line that names no file: NVRTC's or NVVM's own.
_BARE_ERROR = re.compile(r"^(?:nvrtc: |NVVM |LLVM )?(?i:fatal error|error)\b\s*:?\s*(?P<rest>.*)$")
# What `--ptxas-options=-v` adds: the grader reads the shared memory from it, the student
# does not need it.
_PTXAS_INFO = re.compile(r"^ptxas (?:info|\s+\.)")
_PTXAS_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']*)'")
_PTXAS_SMEM = re.compile(r"^ptxas info\s*: Used .*?\b(\d+) bytes smem\b")
_SUMMARY = re.compile(r'^(\d+) (?:catastrophic )?errors? detected in the compilation of "(.*)"\.$')
_CARET = re.compile(r"^\s*\^\s*$")
# The assembler's messages come after the front end's: "ptxas error   : Entry function ...".
_PTXAS = re.compile(r"^ptxas (?P<severity>error|fatal|warning)\s*:\s*(?P<rest>.*)$")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_OTHER_FILE_NOTE = "(a message about a file other than yours was left out)"
NO_LINE = "without a line of your file"  # where an error is that names no file


_ERROR, _WARNING, _OTHER, _REMARK = 0, 1, 2, 3


def _rank(line: str, previous: int) -> int | None:
    """Where an entry starting at this line goes (errors first, remarks last); None when the
    line continues the entry before it."""
    header = _HEADER.match(line)
    if header:
        severity = header.group("severity").lower()
        if "error" in severity:
            return _ERROR
        if severity == "warning":
            return _WARNING
        return previous if severity == "note" else _REMARK  # a note stays with its message
    for pattern in (_END_OF_SOURCE, _PTX_INPUT, _PTXAS):
        match = pattern.match(line)
        if match:
            return _WARNING if match.group("severity").lower() == "warning" else _ERROR
    if _BARE_ERROR.match(line):
        return _ERROR
    if _PTXAS_INFO.match(line) or _SUMMARY.match(line) or line.startswith("Remark: "):
        return _OTHER
    return None


def prioritized(log: str, limit: int) -> str:
    """The log with its entries reordered (errors, warnings, the rest, then remarks such as a
    `#pragma message`'s text; the compiler's order kept within each), each entry cut to
    MAX_ENTRY_CHARS and the whole to `limit` characters."""
    work.add(len(log))
    entries: list[tuple[int, list[str]]] = []
    for line in log.split("\n"):
        rank = _rank(line[:400], entries[-1][0] if entries else _OTHER)
        if rank is not None or not entries:
            entries.append((_OTHER if rank is None else rank, [line]))
        else:
            entries[-1][1].append(line)
    out: list[str] = []
    size = 0
    for _, lines in sorted(entries, key=lambda entry: entry[0]):
        text = "\n".join(lines)
        if len(text) > MAX_ENTRY_CHARS:
            text = text[:MAX_ENTRY_CHARS] + f"\n(this message was cut; {len(text)} characters)\n"
        if size + len(text) > limit:
            out.append(f"(the log was cut here; it had {len(log)} characters)")
            break
        out.append(text)
        size += len(text) + 1
    return "\n".join(out)


def static_shared_bytes(log: str) -> dict[str, int]:
    """Kernel -> static shared memory in bytes, from the lines `--ptxas-options=-v` writes."""
    found: dict[str, int] = {}
    kernel = None
    for line in log.split("\n"):
        work.add(len(line) + 1)
        entry = _PTXAS_ENTRY.match(line)
        if entry:
            kernel = entry.group(1)
            found.setdefault(kernel, 0)
            continue
        smem = _PTXAS_SMEM.match(line)
        if smem and kernel is not None:
            found[kernel] = int(smem.group(1))
            kernel = None
    return found


def without_ptxas_info(log: str) -> str:
    return "\n".join(line for line in log.split("\n") if not _PTXAS_INFO.match(line))


def clean_log(log: str, filename: str, source: str, *, hidden: tuple[str, ...] = ()) -> str:
    """The log with only the student's file in it, capped at MAX_LOG_CHARS. A diagnostic
    about one of the `hidden` files (the grader's own, generated) is left out without a note,
    and its errors are not counted in the summary line."""
    work.add(len(log) + len(source))
    log = log.replace("\x00", "")
    # Split on "\n" only, as the compiler does: str.splitlines() would also split on form
    # feeds and other separators a hostile file could use to shape what looks like a new line.
    own_lines = {line.strip() for line in source.split("\n") if line.strip()}
    out: list[str] = []
    keeping = True  # inside a diagnostic about the student's file (or a general line)
    diagnostics = 0
    hidden_errors = 0
    for line in log.split("\n"):
        line = line.rstrip("\r")
        header = _HEADER.match(line)
        if header and header.group("file") in hidden:
            keeping = False
            hidden_errors += "error" in header.group("severity").lower()
            continue
        if header or _END_OF_SOURCE.match(line) or _PTX_INPUT.match(line):
            diagnostics += 1
            if diagnostics > MAX_DIAGNOSTICS:
                out.append(f"(more than {MAX_DIAGNOSTICS} messages; the rest were left out)")
                break
            keeping = header is None or header.group("file") == filename
            out.append(line if keeping else _OTHER_FILE_NOTE)
            continue
        if not line:
            keeping = True  # NVRTC separates diagnostics with an empty line
            out.append(line)
            continue
        if not keeping:
            continue
        ptxas = _PTXAS.match(line)
        if ptxas:
            line = _HEX.sub(lambda m: str(int(m.group(), 16)), line.rstrip())
        summary = _SUMMARY.match(line)
        if summary:
            count = str(max(int(summary.group(1)) - hidden_errors, 1))
            noun = "error" if count == "1" else "errors"
            out.append(f'{count} {noun} detected in the compilation of "{filename}".')
            continue
        echoed = line.startswith("  ") and not _CARET.match(line) and not _is_context(line)
        if echoed and line.strip() not in own_lines:
            continue  # an echoed source line must be one of the student's own lines
        out.append(line)
    text = "\n".join(out).strip("\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    if len(text) > MAX_LOG_CHARS:
        cut = len(text) - MAX_LOG_CHARS
        text = text[:MAX_LOG_CHARS] + f"\n(the log was cut here; {cut} more characters)"
    return text + "\n" if text else ""


def _is_context(line: str) -> bool:
    """Lines NVRTC writes itself under a diagnostic (template instantiation context)."""
    stripped = line.strip()
    return stripped.startswith(("detected during", "instantiation of", "in ", "(")) or bool(
        re.search(r" at line \d+", stripped)
    )


def _error_in(line: str, filename: str) -> tuple[str, str] | None:
    """(where, text) when the line reports an error the student can see in the cleaned log."""
    header = _HEADER.match(line)
    if header:
        if "error" in header.group("severity").lower() and header.group("file") == filename:
            return f"on line {header.group('line')}", header.group("rest").lstrip(":").strip()
        return None
    end = _END_OF_SOURCE.match(line)
    if end:
        if "error" in end.group("severity").lower():
            return "at the end of the file", line.split(":", 2)[-1].strip()
        return None
    ptx = _PTX_INPUT.match(line)
    if ptx:
        if ptx.group("severity") != "warning":
            return "in the inline assembly (PTX)", ptx.group("rest").strip()
        return None
    ptxas = _PTXAS.match(line)
    if ptxas:
        if ptxas.group("severity") != "warning":
            return "when the kernel was assembled", ptxas.group("rest").strip()
        return None
    bare = _BARE_ERROR.match(line)
    if bare:
        return NO_LINE, bare.group("rest").strip()
    return None


def count_errors(log: str, filename: str) -> int:
    """Errors about the student's file (or the end of it, or its assembly), as the cleaned log
    shows them."""
    count = sum(1 for line in log.split("\n") if _error_in(line, filename))
    if count == 0:
        summary = next((m for m in map(_SUMMARY.match, log.split("\n")) if m), None)
        count = int(summary.group(1)) if summary else 0
    return count


def first_error(log: str, filename: str) -> tuple[str, str] | None:
    """(where, message) of the first error: "on line 12", "at the end of the file",
    "in the inline assembly (PTX)", "when the kernel was assembled" (ptxas: resource limits
    such as shared memory) or "without a line of your file"."""
    for line in log.split("\n"):
        error = _error_in(line, filename)
        if error is not None:
            return error[0], _sentence(error[1])
    return None


def _sentence(text: str) -> str:
    text = re.sub(r"^#?\d+(-D)?:\s*", "", text)  # NVRTC's diagnostic numbers
    text = text[:300]
    return text if text.endswith((".", "!", "?")) else text + "."
