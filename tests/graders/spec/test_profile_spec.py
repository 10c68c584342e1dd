"""A lab's [profile] table: the case profiled, who downloads reports, the ladder's findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.spec import LabSpecError, list_builtin_labs, load_builtin_lab, load_lab
from tests.graders.spec_samples import GOOD_SPEC, write_lab

PROFILE = """
[profile]
report_download = "students"

[profile.expect]
naive = ["uncoalesced_global"]
"""


def test_profile_defaults_to_the_timed_case_staff_downloads_and_no_expectations(
    tmp_path: Path,
) -> None:
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC))
    assert lab.profile.enabled and lab.profile.report_download == "staff"
    assert lab.profile.expect == {}
    assert lab.timing is not None and lab.profile_case.name == lab.timing.case


def test_the_table_is_read(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, GOOD_SPEC + PROFILE))
    assert lab.profile.report_download == "students"
    assert lab.profile.expect == {"naive": ("uncoalesced_global",)}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[profile]\nreport_download = "everyone"', "profile.report_download: is one of staff"),
        ('[profile]\ncase = "nope"', "profile.case: no case is named 'nope'"),
        ('[profile]\ncolour = "red"', "profile: unknown key 'colour'"),
        ("[profile.expect]\nfastest = []", "profile.expect: unknown key 'fastest'"),
        ('[profile.expect]\nnaive = ["slow"]', "profile.expect.naive[0]: 'slow' is not a finding"),
    ],
)
def test_a_malformed_table_is_refused_naming_the_field(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(LabSpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_lab(write_lab(tmp_path, GOOD_SPEC + "\n" + table + "\n"))


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_builtin_labs_expect_findings_only_of_their_own_references(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    names = {r.name for r in lab.references}
    assert set(lab.profile.expect) <= names
    assert lab.profile_case.name in {c.name for c in lab.cases}
