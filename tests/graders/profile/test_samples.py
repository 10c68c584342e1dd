"""The small real reports bench/ncu_samples.py wrote on a GPU host (data/samples): every slow
kernel's finding on its line, and every reference as the lab's ladder expects, read again on
the CPU with today's findings code."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from graders.labcheck.slow import ladder_problem, profile_problem, read_slow_header
from graders.profile import extract
from graders.profile.findings import PATTERN_KINDS, findings_of
from graders.spec import load_builtin_lab
from tests.graders.profile.conftest import DATA

SAMPLES = DATA / "samples"
INDEX: list[dict[str, Any]] = (
    json.loads((SAMPLES / "index.json").read_text(encoding="utf-8"))
    if (SAMPLES / "index.json").is_file()
    else []
)


def _summary(entry: dict[str, Any], reader: Any, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / Path(entry["report"]).name.removesuffix(".xz")
    path.write_bytes(lzma.decompress((SAMPLES / entry["report"]).read_bytes()))
    return extract.summarize_report(path, filename=entry["file"], reader=reader)


@pytest.mark.skipif(
    not INDEX, reason="no sample reports yet: run bench/ncu_samples.py on a GPU host"
)
@pytest.mark.parametrize(
    "entry",
    [e for e in INDEX if "report" in e],
    ids=[f"{e['lab']}/{e['role']}-{e['name']}" for e in INDEX if "report" in e],
)
def test_a_saved_report_shows_what_the_lab_expects(
    entry: dict[str, Any], reader: Any, tmp_path: Path
) -> None:
    lab = load_builtin_lab(entry["lab"])
    found = findings_of(_summary(entry, reader, tmp_path))
    if entry["role"] == "slow":
        exp = read_slow_header(lab.folder / "slow" / entry["file"])
        assert profile_problem(exp, [(f.kind, f.line) for f in found]) is None
    else:
        kinds = sorted({f.kind for f in found if f.kind in PATTERN_KINDS})
        assert ladder_problem(lab.profile.expect.get(entry["name"], ()), kinds) is None
