"""Reference timings kept in a real database: reused while young, replaced when measured again."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.grading.models import ReferenceTiming
from app.grading.reference_cache import keep_timings, kept_timings

KEY = {"gpu": "NVIDIA H100", "driver": "580.1", "case": "square-2048"}


def _stats(median: float) -> dict[str, object]:
    return {"median_ms": median, "min_ms": median, "mean_ms": median, "stdev_ms": 0.0,
            "reps": 10, "rse": 0.001, "sm_clock_mhz": 1980, "temperature_c": 40}  # fmt: skip


def test_kept_timings_are_found_by_gpu_driver_lab_version_and_case(session: Session) -> None:
    digest = "a" * 64
    keep_timings(session, digest=digest, measured={"naive": _stats(9.0)}, **KEY)
    session.commit()
    found = kept_timings(session, digest=digest, max_age_seconds=3600, **KEY)
    assert found == {"naive": _stats(9.0)}
    for other in ({"gpu": "NVIDIA H200"}, {"driver": "590.0"}, {"case": "square-1024"}):
        assert kept_timings(session, digest=digest, max_age_seconds=3600, **{**KEY, **other}) == {}
    assert kept_timings(session, digest="b" * 64, max_age_seconds=3600, **KEY) == {}


def test_an_old_timing_is_not_handed_out_and_a_new_one_replaces_it(session: Session) -> None:
    digest = "c" * 64
    old = utcnow() - timedelta(days=10)
    keep_timings(session, digest=digest, measured={"tiled": _stats(2.0)}, now=old, **KEY)
    session.commit()
    assert kept_timings(session, digest=digest, max_age_seconds=7 * 86400, **KEY) == {}
    assert kept_timings(session, digest=digest, max_age_seconds=30 * 86400, **KEY) != {}
    keep_timings(session, digest=digest, measured={"tiled": _stats(2.1)}, **KEY)
    session.commit()
    assert kept_timings(session, digest=digest, max_age_seconds=3600, **KEY) == {
        "tiled": _stats(2.1)
    }
    count = session.scalar(
        select(func.count())
        .select_from(ReferenceTiming)
        .where(ReferenceTiming.lab_digest == digest)
    )
    assert count == 1


def test_an_age_of_zero_always_measures_again(session: Session) -> None:
    digest = "d" * 64
    keep_timings(session, digest=digest, measured={"naive": _stats(9.0)}, **KEY)
    session.commit()
    assert kept_timings(session, digest=digest, max_age_seconds=0, **KEY) == {}
