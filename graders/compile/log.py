"""Make NVRTC's log safe and useful to show a student.

Defence in depth behind the include policy: a diagnostic about any file other than the
student's is replaced by a one-line note (so no other file's text can reach the page), a
source line the compiler echoes is kept only if it is a line of the student's own file, and the
whole log is capped.
"""

from __future__ import annotations

import re

MAX_LOG_CHARS = 20_000
MAX_DIAGNOSTICS = 100
_HEADER = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>catastrophic error|error|warning|remark"
    r"|note)(?P<rest>.*)$"
)
_END_OF_SOURCE = re.compile(r"^At end of source: (?P<severity>catastrophic error|error|warning)")
_SUMMARY = re.compile(r'^(\d+) (?:catastrophic )?errors? detected in the compilation of "(.*)"\.$')
_CARET = re.compile(r"^\s*\^\s*$")
# The assembler's messages come after the front end's: "ptxas error   : Entry function ...".
_PTXAS = re.compile(r"^ptxas (?P<severity>error|fatal|warning)\s*:\s*(?P<rest>.*)$")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_OTHER_FILE_NOTE = "(a message about a file other than yours was left out)"


def clean_log(log: str, filename: str, source: str) -> str:
    """The log with only the student's file in it, capped at MAX_LOG_CHARS."""
    log = log.replace("\x00", "")
    # Split on "\n" only, as the compiler does: str.splitlines() would also split on form
    # feeds and other separators a hostile file could use to shape what looks like a new line.
    own_lines = {line.strip() for line in source.split("\n") if line.strip()}
    out: list[str] = []
    keeping = True  # inside a diagnostic about the student's file (or a general line)
    diagnostics = 0
    for line in log.split("\n"):
        line = line.rstrip("\r")
        header = _HEADER.match(line)
        if header or _END_OF_SOURCE.match(line):
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
            count = summary.group(1)
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


def count_errors(log: str, filename: str) -> int:
    """Errors about the student's file (or the end of it), as the cleaned log shows them."""
    count = 0
    for line in log.split("\n"):
        header = _HEADER.match(line)
        end = _END_OF_SOURCE.match(line)
        own = header is not None and header.group("file") == filename
        severity = (
            header.group("severity") if own and header else end.group("severity") if end else ""
        )
        ptxas = _PTXAS.match(line)
        if "error" in severity or (ptxas and ptxas.group("severity") != "warning"):
            count += 1
    if count == 0:
        summary = next((m for m in map(_SUMMARY.match, log.split("\n")) if m), None)
        count = int(summary.group(1)) if summary else 0
    return count


def first_error(log: str, filename: str) -> tuple[str, str] | None:
    """(where, message) of the first error: "on line 12", "at the end of the file" or
    "when the kernel was assembled" (ptxas: resource limits such as shared memory)."""
    for line in log.split("\n"):
        header = _HEADER.match(line)
        if header and "error" in header.group("severity") and header.group("file") == filename:
            text = header.group("rest").lstrip(":").strip()
            return f"on line {header.group('line')}", _sentence(text)
        end = _END_OF_SOURCE.match(line)
        if end and "error" in end.group("severity"):
            return "at the end of the file", _sentence(line.split(":", 2)[-1].strip())
        ptxas = _PTXAS.match(line)
        if ptxas and ptxas.group("severity") != "warning":
            return "when the kernel was assembled", _sentence(ptxas.group("rest").strip())
    return None


def _sentence(text: str) -> str:
    text = re.sub(r"^#?\d+(-D)?:\s*", "", text)  # NVRTC's diagnostic numbers
    text = text[:300]
    return text if text.endswith((".", "!", "?")) else text + "."
