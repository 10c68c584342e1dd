"""Copies of built-in labs with the cases a test needs: a lab the child can read from its folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from graders.spec import LabSpec, load_builtin_lab, load_lab


def lab_copy(
    lab_id: str,
    workdir: Path,
    *,
    cases: list[dict[str, Any]],
    timed: str | None = None,
    settings: dict[str, str] | None = None,
    work: dict[str, str] | None = None,
) -> LabSpec:
    """The built-in lab `lab_id` with `cases` ({name, sizes, points?, hidden?}) in place of its
    own; `timed` names the timed case; `settings` replaces `key = value` lines anywhere (e.g.
    {"case_seconds": "4", "sanitizer": "false"}); `work` replaces the [work] expressions."""
    source = load_builtin_lab(lab_id)
    folder = workdir / lab_id  # the loader wants the folder named as the lab
    shutil.copytree(source.folder, folder)
    text = (folder / "lab.toml").read_text(encoding="utf-8")
    blocks = []
    for case in cases:
        sizes = ", ".join(f"{k} = {v}" for k, v in case["sizes"].items())
        block = f'[[cases]]\nname = "{case["name"]}"\nsizes = {{ {sizes} }}\n'
        block += f"points = {case.get('points', 5)}\n"
        if case.get("hidden"):
            block += "hidden = true\n"
        blocks.append(block)
    first = text.index("[[cases]]")
    after = text.index("[[references]]")
    text = text[:first] + "\n".join(blocks) + "\n" + text[after:]
    names = {c["name"] for c in cases}
    if timed is None and source.timing is not None and source.timing.case not in names:
        timed = cases[-1]["name"]
    if timed is not None:
        text = re.sub(r'(?m)^case\s*=\s*".*"$', f'case = "{timed}"', text)
    match = re.search(r'(?m)^sanitizer_case\s*=\s*"(.*)"$', text)
    if match and match.group(1) not in names:
        text = text.replace(match.group(0), f'sanitizer_case = "{cases[0]["name"]}"')
    for key, value in (settings or {}).items():
        text, count = re.subn(rf"(?m)^{re.escape(key)}\s*=.*$", f"{key} = {value}", text)
        if not count:
            table = "[limits]" if key in ("gpu_seconds", "case_seconds") else "[lab]"
            text = text.replace(table, f"{table}\n{key} = {value}", 1)
    for key, value in (work or {}).items():
        text = re.sub(rf"(?m)^{key}\s*=.*$", f'{key} = "{value}"', text)
    (folder / "lab.toml").write_text(text, encoding="utf-8")
    return load_lab(folder)
