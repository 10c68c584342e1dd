"""Service test fixtures: one real SQLite database (and broker file) per test session,
migrated with Alembic; httpx against the app through ASGITransport; rows built by factories.
KERNELGRADER_TEST_DATABASE_URL / KERNELGRADER_TEST_BROKER_URL run the same tests on
PostgreSQL / Redis instead (every test makes its own course and users, so no cleanup).

The environment is set before any `app` module is imported, because the Celery app and the
settings are read once per process.
"""

from __future__ import annotations

import functools
import itertools
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

_DATA_DIR = Path(tempfile.mkdtemp(prefix="kernelgrader-tests-"))
os.environ.update(
    {
        "KERNELGRADER_ENV": "test",
        "KERNELGRADER_DATA_DIR": str(_DATA_DIR),
        # The larger setup's services when given (e.g. PostgreSQL and Redis in CI), else files.
        "KERNELGRADER_DATABASE_URL": os.environ.get("KERNELGRADER_TEST_DATABASE_URL")
        or f"sqlite:///{_DATA_DIR / 'test.sqlite'}",
        "KERNELGRADER_BROKER_URL": os.environ.get("KERNELGRADER_TEST_BROKER_URL")
        or f"sqla+sqlite:///{_DATA_DIR / 'broker.sqlite'}",
        "KERNELGRADER_SECRET_KEY": "test-secret-key-not-for-production",
        "KERNELGRADER_GRADING_SECRET": "test-grading-secret",
        # Deterministic on any machine: the service tests check the compile-only path.
        "KERNELGRADER_RUN_ON_GPU": "false",
        "KERNELGRADER_BROKER_POLLING_SECONDS": "0.1",
        "KERNELGRADER_SWEEP_SECONDS": "0.5",
        # A locked SQLite answers 503 after this wait; short, so the test of it is quick.
        "KERNELGRADER_SQLITE_BUSY_TIMEOUT_SECONDS": "2",
    }
)

import httpx  # noqa: E402
import pytest  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.cli.database import upgrade_database  # noqa: E402
from app.core.database import new_session  # noqa: E402
from app.core.security import hash_password  # noqa: E402
from app.core.settings import get_settings  # noqa: E402
from app.courses.models import Course, Lab, LatePolicy, Role, ScorePolicy  # noqa: E402
from app.courses.service import add_lab, create_course, enroll  # noqa: E402
from app.jobs.sender import job_sender  # noqa: E402
from app.main import create_app  # noqa: E402
from app.teams.models import Team  # noqa: E402
from app.teams.service import form_team  # noqa: E402
from app.users.models import User  # noqa: E402
from app.users.service import create_api_token, ensure_user  # noqa: E402

TEST_LAB = Path(__file__).parent / "labs" / "scale-test"
PASSWORD = "correct horse battery"

GOOD_KERNEL = """\
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = factor * src[i];
}
"""

_counter = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}{next(_counter)}-{os.getpid()}"


@pytest.fixture(scope="session", autouse=True)
def database() -> Iterator[Path]:
    get_settings.cache_clear()
    upgrade_database()
    yield _DATA_DIR


@pytest.fixture(autouse=True)
def jobs_sent_before_the_next_test() -> Iterator[None]:
    """Requests hand their jobs to a sender thread (app.jobs.sender): a test's jobs reach
    the broker it meant before the next test looks at the broker, empties it or replaces it."""
    yield
    assert job_sender.wait_sent(60), "the job sender did not finish within 60 s"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def session() -> Iterator[Session]:
    s = new_session()
    try:
        yield s
    finally:
        s.rollback()
        s.close()


@dataclass
class Member:
    user: User
    token: str
    role: Role

    @property
    def email(self) -> str:
        return self.user.email

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class World:
    """A course with one lab, a student, another student, a TA and an instructor."""

    course: Course
    lab: Lab
    student: Member
    other_student: Member
    ta: Member
    instructor: Member
    outsider: Member

    def pair_up(
        self, session: Session, *, now: datetime, name: str = "Pair", lab: Lab | None = None
    ) -> Team:
        """The student and the other student as one team of a lab (default this world's),
        formed by staff."""
        return form_team(
            session,
            course=self.course,
            lab=lab or self.lab,
            name=name,
            emails=[self.student.email, self.other_student.email],
            by=None,
            now=now,
        )


@functools.cache
def password_hash() -> str:
    # argon2 is slow on purpose; hash the shared test password once per session.
    return hash_password(PASSWORD)


def make_member(session: Session, course: Course | None, role: Role) -> Member:
    user = ensure_user(session, email=f"{unique(role.value)}@example.edu", name=f"A {role.value}")
    user.password_hash = password_hash()
    if course is not None:
        enroll(session, user=user, course=course, role=role)
    token = create_api_token(session, user=user)
    return Member(user=user, token=token, role=role)


def make_world(
    session: Session,
    *,
    score_policy: ScorePolicy = ScorePolicy.best,
    late_policy: LatePolicy = LatePolicy.accept,
    release_at=None,
    due_at=None,
) -> World:
    course = create_course(session, slug=unique("course"), title="Test course")
    lab = add_lab(
        session,
        course=course,
        ref=str(TEST_LAB),
        score_policy=score_policy,
        late_policy=late_policy,
        release_at=release_at,
        due_at=due_at,
    )
    world = World(
        course=course,
        lab=lab,
        student=make_member(session, course, Role.student),
        other_student=make_member(session, course, Role.student),
        ta=make_member(session, course, Role.ta),
        instructor=make_member(session, course, Role.instructor),
        outsider=make_member(session, None, Role.student),
    )
    session.commit()
    return world


@pytest.fixture
def world(session: Session) -> World:
    return make_world(session)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c
