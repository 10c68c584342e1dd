"""Similarity reports: computed by the worker's task with copydetect, the lab's references
left out as boilerplate, optionally against earlier terms, shown to staff only."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab, Role
from app.courses.service import add_lab, create_course
from app.similarity.models import EarlierOffering, ReportState, SimilarityReport
from app.similarity.service import _passages
from app.similarity.sweep import reports_to_send
from app.similarity.tasks import compute
from app.submissions.models import Submission
from app.users.models import User
from tests.app.conftest import World, make_member, make_world, unique
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio

REFERENCES = "reference_kernels/vector-scale"

# Written by "a student": a distinctive kernel, long enough to fingerprint.
SHARED = """\
__device__ float clamp_and_scale(float value, float factor, float lowest, float highest)
{
    float scaled = value * factor;
    if (scaled < lowest) { scaled = lowest; }
    if (scaled > highest) { scaled = highest; }
    return scaled + 0.0f * lowest * highest;
}

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int first = blockIdx.x * blockDim.x * 4 + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
        unsigned int i = first + k * blockDim.x;
        if (i < n) { dst[i] = clamp_and_scale(src[i], factor, -1.0e30f, 1.0e30f); }
    }
}
"""

OTHER = """\
extern "C" __global__ void scale(const float* in, float* out, unsigned int count, float f)
{
    for (unsigned int j = threadIdx.x + blockIdx.x * blockDim.x; j < count;
         j += gridDim.x * blockDim.x) {
        float2 pair = make_float2(in[j], f);
        out[j] = pair.x * pair.y;
    }
}
"""


def _submit(session: Session, world_lab: Lab, user: User, source: str) -> Submission:
    sub, _ = make_submission(session, user=user, lab=world_lab, score=10)
    sub.source_text = source
    return sub


def vector_world(session: Session) -> tuple[World, Lab]:
    world = make_world(session)
    lab = add_lab(session, course=world.course, ref="vector-scale")
    session.commit()
    return world, lab


def _reference(name: str) -> str:
    return (Path(__file__).resolve().parents[3] / REFERENCES / name).read_text()


async def test_a_report_pairs_the_copies_and_leaves_the_references_out(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, lab = vector_world(session)
    third = make_member(session, world.course, Role.student)
    fourth = make_member(session, world.course, Role.student)
    _submit(session, lab, world.student.user, SHARED)
    _submit(session, lab, world.other_student.user, SHARED.replace("value", "v"))
    # Both hand in the lab's own reference kernels: boilerplate, never a pair.
    _submit(session, lab, third.user, _reference("one_per_thread.cu"))
    _submit(session, lab, fourth.user, _reference("one_per_thread.cu"))
    session.commit()
    base = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    r = await client.post(base, headers=world.student.auth, json={})
    assert r.status_code == 403  # students never reach it
    r = await client.post(base, headers=world.ta.auth, json={})
    assert r.status_code == 202, r.text
    report_id = r.json()["id"]
    assert r.json()["state"] == "queued"
    busy = await client.post(base, headers=world.ta.auth, json={})
    assert busy.status_code == 409
    # The worker's task (sent to the broker by the request), run here.
    assert compute.apply(args=[report_id]).get() == "done"
    assert compute.apply(args=[report_id]).get() == "done"  # delivered twice: one report
    report = (await client.get(f"/api/v1/similarity/{report_id}", headers=world.ta.auth)).json()
    assert report["stats"]["submissions"] == 4
    assert report["stats"]["boilerplate_files"] == 2
    pairs = report["pairs"]
    assert len(pairs) == 1, pairs
    (pair,) = pairs
    assert {pair["a"], pair["b"]} == {world.student.email, world.other_student.email}
    assert pair["a_similarity"] > 0.5 and pair["b_similarity"] > 0.5
    detail = (await client.get(pair["url"], headers=world.ta.auth)).json()
    shared = "".join(p["text"] for p in detail["a_passages"] if p["shared"])
    assert "clamp_and_scale" in shared
    assert "".join(p["text"] for p in detail["a_passages"]) in (
        SHARED,
        SHARED.replace("value", "v"),
    )
    for url in (f"/api/v1/similarity/{report_id}", pair["url"], base):
        assert (await client.get(url, headers=world.student.auth)).status_code == 403


# A small helper, copied whole into a file many times its size.
HELPER = SHARED.split('extern "C"')[0]


def _weights(rows: int) -> str:
    numbers = [(i * 7919 + 13) % 100003 for i in range(rows * 12)]
    lines = ",\n".join(
        "    " + ", ".join(str(n) for n in numbers[r * 12 : (r + 1) * 12]) for r in range(rows)
    )
    return f"__constant__ int weights[{rows * 12}] = {{\n{lines}\n}};\n\n"


async def test_a_small_function_copied_into_a_much_larger_file_is_listed(
    client: httpx.AsyncClient, session: Session
) -> None:
    """Listed by the larger of the two shares: nearly all of the small file is in the large
    one, a small part of the large file is in the small one."""
    world, lab = vector_world(session)
    small = HELPER + (
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) dst[i] = clamp_and_scale(src[i], factor, -1.0e30f, 1.0e30f);\n}\n"
    )
    large = (
        _weights(30)
        + HELPER
        + 'extern "C" __global__ void scale(const float* source, float* target, '
        "unsigned int length, float k)\n{\n"
        "    unsigned int at = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (at >= length) { return; }\n"
        "    int w = weights[at % 360] & 0;\n"
        "    target[at] = clamp_and_scale(source[at], k, -3.0e38f, 3.0e38f) + (float)w;\n"
        "}\n"
    )
    _submit(session, lab, world.student.user, small)
    _submit(session, lab, world.other_student.user, large)
    session.commit()
    base = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    r = await client.post(base, headers=world.ta.auth, json={})
    assert r.status_code == 202, r.text
    assert compute.apply(args=[r.json()["id"]]).get() == "done"
    report = (await client.get(r.json()["url"], headers=world.ta.auth)).json()
    (pair,) = report["pairs"]
    shares = {pair["a"]: pair["a_similarity"], pair["b"]: pair["b_similarity"]}
    assert shares[world.student.email] > 0.5
    assert shares[world.other_student.email] < 0.1  # alone, under the listing's tenth
    detail = (await client.get(pair["url"], headers=world.ta.auth)).json()
    side = "a_passages" if pair["a"] == world.other_student.email else "b_passages"
    shared = "".join(p["text"] for p in detail[side] if p["shared"])
    assert "clamp_and_scale" in shared and "weights" not in shared


def test_earlier_terms_are_compared_when_asked(session: Session) -> None:
    world, lab = vector_world(session)
    earlier = create_course(session, slug=unique("past"), title="Last year")
    old_lab = add_lab(
        session, course=earlier, ref="vector-scale", due_at=utcnow() - timedelta(days=200)
    )
    old_student = make_member(session, earlier, Role.student)
    # Linked as this course's earlier offering (app.similarity.offerings), and over.
    session.add(EarlierOffering(course_id=world.course.id, earlier_course_id=earlier.id))
    _submit(session, old_lab, old_student.user, SHARED)
    _submit(session, lab, world.student.user, SHARED)
    _submit(session, lab, world.other_student.user, OTHER)
    report = SimilarityReport(lab_id=lab.id, include_past=True)
    plain = SimilarityReport(lab_id=lab.id, include_past=False, state="done")
    session.add_all([report, plain])
    session.commit()
    assert compute.apply(args=[report.id]).get() == "done"
    session.expire_all()
    from app.similarity.service import pairs_of

    pairs = {(p.a_label, p.b_label): p.pair for p in pairs_of(session, report=report)}
    assert list(pairs) == [(world.student.email, f"{earlier.slug}: {old_student.email}")]
    (found,) = pairs.values()
    assert found.a_similarity == pytest.approx(1.0)
    # The other student's own kernel matches nobody; the plain report compares nothing past.
    assert not any(world.other_student.email in key for key in pairs)
    assert compute.apply(args=[plain.id]).get() == "done"  # finished already: left alone


def test_the_sweep_sends_a_report_whose_send_failed(session: Session) -> None:
    world, lab = vector_world(session)
    report = SimilarityReport(lab_id=lab.id, sent_at=None)
    stuck = SimilarityReport(
        lab_id=lab.id,
        state=ReportState.running.value,
        started_at=utcnow() - timedelta(hours=2),
        attempt=1,
    )
    session.add_all([report, stuck])
    session.commit()
    picked = [s.job_id for s in reports_to_send(session, now=utcnow())]
    session.commit()
    assert report.id in picked and stuck.id in picked
    assert (
        session.scalar(select(SimilarityReport.state).where(SimilarityReport.id == stuck.id))
        == ReportState.queued.value
    )
    # Stamped: the next sweep does not send them again at once.
    assert not {s.job_id for s in reports_to_send(session, now=utcnow())} & {report.id, stuck.id}


def test_highlights_start_and_end_on_whole_words_past_the_space() -> None:
    """copydetect's ranges can cut a name in two (its k-grams skip spaces): a passage keeps
    only the whole words in its range, without the space at its ends."""
    text = "    float partial = mine;\n    int k = 0;\n"
    # From inside "float" to inside "mine", and a range of only the indent before "int".
    shown = [(p.text, p.shared) for p in _passages(text, [[7, 22], [26, 30]])]
    assert shown == [
        ("    float ", False),
        ("partial =", True),
        (" mine;\n    int k = 0;\n", False),
    ]
    # Ranges that overlap are one passage; a range that ends on a word's end keeps the word.
    shown = [(p.text, p.shared) for p in _passages(text, [[4, 17], [10, 24]])]
    assert shown == [
        ("    ", False),
        ("float partial = mine", True),
        (";\n    int k = 0;\n", False),
    ]
