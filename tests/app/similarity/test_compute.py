"""What a report compares and lists, computed by the worker's task: each student's counted
submission (their latest where nothing counts yet), a team's once under its members' names; the
lab's files and its starter code as boilerplate, an unreadable file skipped; earlier terms'
students' latest graded work; the most similar pairs first; a failure recorded in a sentence."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

import app.similarity.compute as similarity_compute
from app.core.database import utcnow
from app.courses.models import Lab, Role
from app.courses.service import add_lab, create_course, enroll
from app.similarity.models import EarlierOffering, SimilarityReport
from app.similarity.service import pairs_of
from app.similarity.tasks import compute
from app.submissions.credits import credit_submission
from app.submissions.models import JobState, Status, Submission
from app.teams.service import form_team
from app.users.models import User
from tests.app.conftest import World, make_member, make_world, unique
from tests.app.factories import make_submission
from tests.app.similarity.test_similarity import HELPER, SHARED, _reference, vector_world

pytestmark = pytest.mark.anyio

REFERENCES = Path(__file__).resolve().parents[3] / "reference_kernels" / "vector-scale"

# A kernel of its own calling the shared helper, which closes the file: a third of it.
HELPED = (
    "__device__ float clamp_and_scale(float value, float factor, float lowest, float highest);\n"
    "\n"
    'extern "C" __global__ void scale(const float* a, float* b, unsigned int m, float s)\n'
    "{\n"
    "    unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (k >= m) { return; }\n"
    "    float kept = clamp_and_scale(a[k], s, -7.5e20f, 7.5e20f);\n"
    "    b[k] = kept;\n"
    "}\n"
    "\n" + HELPER
)


def _hand_in(
    session: Session, lab: Lab, user: User, source: str, *, graded: bool = True
) -> Submission:
    if graded:
        sub, _ = make_submission(session, user=user, lab=lab, score=10)
    else:
        sub, _ = make_submission(
            session, user=user, lab=lab, status=Status.queued, job_state=JobState.queued
        )
    sub.source_text = source
    return sub


async def _report(client: httpx.AsyncClient, world: World, lab: Lab, **ask: object) -> dict:
    base = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    r = await client.post(base, headers=world.ta.auth, json=ask)
    assert r.status_code == 202, r.text
    assert compute.apply(args=[r.json()["id"]]).get() == "done"
    done = await client.get(r.json()["url"], headers=world.ta.auth)
    assert done.status_code == 200, done.text
    return dict(done.json())


async def test_a_team_is_compared_once_and_a_student_with_nothing_counted_by_their_latest(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    lab.team_size = 2
    form_team(
        session,
        course=world.course,
        lab=lab,
        name="Pair",
        emails=[world.student.email, world.other_student.email],
        by=None,
        now=utcnow(),
    )
    waiting = make_member(session, world.course, Role.student)
    idle = make_member(session, world.course, Role.student)  # nothing handed in
    # The team's submission (it counts for both), credited as an upload credits it.
    team_sub = _hand_in(session, lab, world.student.user, SHARED)
    credit_submission(session, submission=team_sub, lab=lab)
    # Nothing graded yet: their latest is compared (an older one says otherwise).
    old = _hand_in(session, lab, waiting.user, HELPED, graded=False)
    old.created_at = utcnow() - timedelta(hours=1)
    _hand_in(session, lab, waiting.user, SHARED.replace("value", "v"), graded=False)
    session.commit()
    report = await _report(client, world, lab)
    assert report["stats"]["submissions"] == 2
    (pair,) = report["pairs"]
    team_label = ", ".join(sorted([world.student.email, world.other_student.email]))
    assert {pair["a"], pair["b"]} == {team_label, waiting.email}
    assert idle.email not in str(report)


async def test_the_most_similar_pair_comes_first(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    third = make_member(session, world.course, Role.student)
    _hand_in(session, lab, world.student.user, SHARED)
    _hand_in(session, lab, world.other_student.user, HELPED)
    _hand_in(session, lab, third.user, SHARED.replace("value", "v"))
    session.commit()
    pairs = (await _report(client, world, lab))["pairs"]
    assert [p["rank"] for p in pairs] == list(range(1, len(pairs) + 1))
    assert {pairs[0]["a"], pairs[0]["b"]} == {world.student.email, third.email}
    tops = [max(p["a_similarity"], p["b_similarity"]) for p in pairs]
    assert tops == sorted(tops, reverse=True) and tops[0] > tops[-1]
    assert all(p["overlap_tokens"] > 0 for p in pairs)
    # Every share is of its own side: the helper is a larger part of the smaller file.
    helped = next(p for p in pairs if world.other_student.email in (p["a"], p["b"]))
    mine = (
        helped["a_similarity"]
        if helped["a"] == world.other_student.email
        else helped["b_similarity"]
    )
    theirs = (
        helped["b_similarity"]
        if helped["a"] == world.other_student.email
        else helped["a_similarity"]
    )
    assert mine != theirs


async def test_the_labs_files_and_starter_code_are_boilerplate_past_an_unreadable_one(
    client: httpx.AsyncClient, session: Session, tmp_path: Path
) -> None:
    folder = tmp_path / "vector-scale"
    shutil.copytree(REFERENCES, folder)
    (folder / "a_unreadable.cu").write_bytes(b"\xff\xfe not UTF-8 \x80")
    (folder / "notes.txt").write_text(SHARED)  # not code: not boilerplate
    (folder / "starter").mkdir()
    (folder / "starter" / "helper.cuh").write_text(HELPER)
    world = make_world(session)
    lab = add_lab(session, course=world.course, ref=str(folder))
    third = make_member(session, world.course, Role.student)
    fourth = make_member(session, world.course, Role.student)
    # Both hand in the lab's own reference (read after the unreadable file): no pair. Two
    # others use the starter's helper in kernels of their own: no pair either.
    _hand_in(session, lab, world.student.user, _reference("one_per_thread.cu"))
    _hand_in(session, lab, world.other_student.user, _reference("one_per_thread.cu"))
    _hand_in(session, lab, third.user, HELPED)
    _hand_in(session, lab, fourth.user, SHARED)
    session.commit()
    report = await _report(client, world, lab)
    assert report["stats"]["boilerplate_files"] == 4  # the three .cu and the starter's .cuh
    assert report["pairs"] == [], report["pairs"]
    # The two copies of the reference are listed on their own; the starter's helper is not a
    # reference, so its users are not.
    copies = {c["label"]: c for c in report["reference_copies"]}
    assert set(copies) == {world.student.email, world.other_student.email}, copies
    assert {c["reference"] for c in copies.values()} == {"one_per_thread.cu"}
    assert all(c["share"] == 1.0 for c in copies.values())


# The reference with its one-statement `if` written without braces: nearly all of it (90%).
NEARLY = _reference("one_per_thread.cu").replace(
    "{\n        dst[i] = src[i] * factor;\n    }", "dst[i] = src[i] * factor;"
)
# The reference and a helper of the student's own: 79% of it, under the "nearly" line of 80%.
PARTLY = _reference("one_per_thread.cu") + "\n__device__ float twice(float v) { return v + v; }\n"


async def test_a_submission_nearly_a_reference_is_listed_and_one_partly_a_reference_is_not(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    third = make_member(session, world.course, Role.student)
    _hand_in(session, lab, world.student.user, NEARLY)
    _hand_in(session, lab, world.other_student.user, PARTLY)
    _hand_in(session, lab, third.user, SHARED)
    session.commit()
    report = await _report(client, world, lab)
    (copy,) = report["reference_copies"]
    assert copy["label"] == world.student.email and copy["reference"] == "one_per_thread.cu"
    assert similarity_compute.NEARLY_REFERENCE <= copy["share"] < 1.0, copy
    assert report["stats"]["reference_copies"] == 1


async def test_earlier_terms_give_their_students_latest_graded_work_only(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    earlier = create_course(session, slug=unique("past"), title="Last year")
    old_lab = add_lab(
        session, course=earlier, ref="vector-scale", due_at=utcnow() - timedelta(days=200)
    )
    # Linked as this course's earlier offering (app.similarity.offerings), and over.
    session.add(EarlierOffering(course_id=world.course.id, earlier_course_id=earlier.id))
    graded_then = make_member(session, earlier, Role.student)
    replaced = make_member(session, earlier, Role.student)
    never_graded = make_member(session, earlier, Role.student)
    old_ta = make_member(session, earlier, Role.ta)
    # The TA was a student in another course: a student somewhere is not a student here.
    enroll(
        session,
        user=old_ta.user,
        course=create_course(session, slug=unique("c"), title="C"),
        role=Role.student,
    )
    # An offering before that one, also linked and over, where the same student took the lab.
    earliest = create_course(session, slug=unique("past"), title="Two years ago")
    oldest_lab = add_lab(
        session, course=earliest, ref="vector-scale", due_at=utcnow() - timedelta(days=500)
    )
    session.add(EarlierOffering(course_id=world.course.id, earlier_course_id=earliest.id))
    enroll(session, user=graded_then.user, course=earliest, role=Role.student)
    marker = unique("v")
    mine = SHARED.replace("value", marker)
    _hand_in(session, old_lab, graded_then.user, mine)
    first = _hand_in(session, old_lab, replaced.user, mine)
    first.created_at = utcnow() - timedelta(days=1)
    _hand_in(session, old_lab, replaced.user, HELPED.replace("kept", marker))  # their latest
    _hand_in(session, old_lab, never_graded.user, mine, graded=False)
    _hand_in(session, old_lab, old_ta.user, mine)  # staff's, not a student's
    _hand_in(session, oldest_lab, graded_then.user, mine)
    _hand_in(session, lab, world.student.user, mine)
    session.commit()
    # Not asked for: no earlier work is compared.
    plain = await _report(client, world, lab)
    assert plain["pairs"] == [] and plain["stats"]["past_submissions"] == 0
    report = await _report(client, world, lab, include_past=True)
    assert report["include_past"] is True
    labels = {p["b"] for p in report["pairs"] if p["a"] == world.student.email}
    # Once per offering they took the lab in.
    assert {
        f"{earlier.slug}: {graded_then.email}",
        f"{earliest.slug}: {graded_then.email}",
    } <= labels
    assert report["stats"]["past_submissions"] == 3  # graded_then twice, replaced once
    for absent in (never_graded, old_ta):
        assert not any(absent.email in label for label in labels), absent.email
    # The replaced student's latest is theirs: a partial match, below the full copy.
    listed = {p["b"]: p for p in report["pairs"] if p["a"] == world.student.email}
    partial = listed.get(f"{earlier.slug}: {replaced.email}")
    assert partial is not None and partial["a_similarity"] < 1.0
    full = listed[f"{earlier.slug}: {graded_then.email}"]
    # A full copy is all of both sides, each side's boilerplate (the lab's signature) left out.
    assert full["a_similarity"] == pytest.approx(1.0)
    assert full["b_similarity"] == pytest.approx(1.0)
    # Past work is compared with this course's only, never with other past work.
    assert all(p["a"] == world.student.email for p in report["pairs"])


def _table(rows: int, seed: int) -> str:
    numbers = [(i * 7919 + seed) % 100003 for i in range(rows * 12)]
    body = ",\n".join(
        "    " + ", ".join(str(n) for n in numbers[r * 12 : (r + 1) * 12]) for r in range(rows)
    )
    return f"__constant__ int weights[{rows * 12}] = {{\n{body}\n}};\n\n"


async def test_a_pair_sharing_under_a_tenth_of_each_side_is_not_listed(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    # Two large files of their own that share the small helper only: a few percent of each.
    _hand_in(session, lab, world.student.user, _table(30, 13) + HELPED)
    _hand_in(session, lab, world.other_student.user, _table(30, 977) + HELPER)
    session.commit()
    report = await _report(client, world, lab)
    assert report["stats"]["submissions"] == 2
    assert report["pairs"] == [] and report["stats"]["pairs_listed"] == 0


async def test_each_report_keeps_its_own_pairs_and_says_when_it_was_done(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    _hand_in(session, lab, world.student.user, SHARED)
    _hand_in(session, lab, world.other_student.user, SHARED.replace("value", "v"))
    session.commit()
    first = await _report(client, world, lab)
    third = make_member(session, world.course, Role.student)
    _hand_in(session, lab, third.user, SHARED)
    session.commit()
    second = await _report(client, world, lab)
    assert (len(first["pairs"]), first["stats"]["pairs_listed"]) == (1, 1)
    assert (len(second["pairs"]), second["stats"]["pairs_listed"]) == (3, 3)
    again = await client.get(first["url"], headers=world.ta.auth)
    assert again.json()["pairs"] == first["pairs"]  # the second report left the first's alone
    for done in (first, second):
        assert done["state"] == "done" and done["finished_at"] is not None
    session.expire_all()
    started = session.get_one(SimilarityReport, second["id"]).started_at
    assert started is not None and started <= utcnow()


async def test_a_long_label_is_cut_at_400_characters(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A team's label is its members' emails: ten long ones are longer than a label keeps."""
    world, lab = vector_world(session)
    lab.team_size = 10
    teams = []
    for name in ("Many", "More"):
        members = [make_member(session, world.course, Role.student) for _ in range(10)]
        for m in members:
            m.user.email = "a.student.with.a.long.address." + m.user.email
        form_team(
            session,
            course=world.course,
            lab=lab,
            name=name,
            emails=[m.email for m in members],
            by=None,
            now=utcnow(),
        )
        teams.append(members)
    for members in teams:
        sub = _hand_in(session, lab, members[0].user, SHARED)
        credit_submission(session, submission=sub, lab=lab)
    session.commit()
    (pair,) = (await _report(client, world, lab))["pairs"]
    for side, members in zip(("a", "b"), teams, strict=True):
        whole = ", ".join(sorted(m.email for m in members))
        assert len(whole) > 400 and pair[side] == whole[:400]


async def test_a_report_that_fails_says_why_and_a_missing_one_is_left(
    client: httpx.AsyncClient,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world, lab = vector_world(session)
    _hand_in(session, lab, world.student.user, SHARED)
    session.commit()

    def broken(*args: object, **kwargs: object) -> list[object]:
        raise RuntimeError("the fingerprints could not be made" + " ." * 1500)

    monkeypatch.setattr(similarity_compute, "compute_pairs", broken)
    base = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    r = await client.post(base, headers=world.ta.auth, json={})
    assert compute.apply(args=[r.json()["id"]]).get() == "failed"
    report = (await client.get(r.json()["url"], headers=world.ta.auth)).json()
    assert report["state"] == "failed" and report["finished_at"] is not None
    # One line for the staff (its first 2000 characters), the traceback in the log.
    error = "RuntimeError: the fingerprints could not be made" + " ." * 1500
    assert report["error"] == error[:2000]
    (logged,) = [r for r in caplog.records if r.name == "app.similarity.compute"]
    assert logged.getMessage() == f"similarity report {r.json()['id']} failed"
    assert logged.exc_info is not None and "could not be made" in str(logged.exc_info[1])
    assert report["pairs"] == []
    # Failed, it is not busy: another can be asked for.
    assert (await client.post(base, headers=world.ta.auth, json={})).status_code == 202
    assert compute.apply(args=[10**12]).get() == "missing"
    session.expire_all()
    assert session.get(SimilarityReport, r.json()["id"]) is not None
    assert pairs_of(session, report=session.get_one(SimilarityReport, r.json()["id"])) == []
