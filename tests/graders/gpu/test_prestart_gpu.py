"""Run children started ahead of need: warm when a submission comes, one submission each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.grade import grade_source
from graders.sandbox import prestart
from graders.spec import load_builtin_lab

SECRET = "kernelgrader-test-secret"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def run_pool() -> Iterator[prestart.Prestarter]:
    spec = prestart.PoolSpec("run", gpu=True, warm="graders.run.child:warm_up", spares=1)
    pool = prestart.configure(spec, fill=False)
    pool.fill()
    yield pool
    prestart.close_all()


@pytest.mark.gpu
def test_a_prestarted_child_never_serves_two_submissions(run_pool: prestart.Prestarter) -> None:
    lab = load_builtin_lab("vector-scale")
    good = lab.reference("one-per-thread").source
    reports = [grade_source(lab, good, secret=SECRET, sanitizer=False) for _ in range(3)]
    for report in reports:
        assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
    pids = run_pool.handed_out
    assert len(pids) == 3 and len(set(pids)) == 3, pids
    assert not any(_alive(pid) for pid in pids)  # each exited after its one submission
    print("run stage seconds with a warm child:", [r.stage_seconds for r in reports])
