"""Fuzz the REST API from its own OpenAPI schema (schemathesis, in process over ASGI): no 5xx.

Every operation gets up to FUZZ_EXAMPLES generated requests (25 by default; set
KERNELGRADER_FUZZ_EXAMPLES for a longer run). Half of them use the real course, lab and
submission of a small world, so generated input reaches the handlers and not only the 404s;
callers are an instructor, a student or nobody. Derandomized, so CI sees the same cases.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from app.core.database import new_session
from app.main import create_app
from app.users.service import create_api_token
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission

FUZZ_EXAMPLES = int(os.environ.get("KERNELGRADER_FUZZ_EXAMPLES", "25"))
CASES_RUN: collections.Counter[str] = collections.Counter()
STATUSES: collections.Counter[int] = collections.Counter()


@pytest.fixture(scope="module")
def fuzz_world(request: pytest.FixtureRequest) -> Iterator[tuple[World, int]]:
    session = new_session()
    try:
        world = make_world(session)
        submission, _ = make_submission(session, user=world.student.user, lab=world.lab)
        session.commit()
        submission_id = submission.id
    finally:
        session.close()
    yield world, submission_id
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    total = sum(CASES_RUN.values())
    lines = [f"schemathesis: {total} generated requests over {len(CASES_RUN)} operations"]
    lines += [f"  {count:4d}  {name}" for name, count in sorted(CASES_RUN.items())]
    lines.append("  statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(STATUSES.items())))
    text = "\n".join(lines)
    print(text)
    if reporter is not None:
        reporter.write_line(text)


@pytest.fixture(scope="module")
def api_schema(fuzz_world: tuple[World, int]) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/openapi.json", create_app())


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@schema.given(use_real=st.booleans(), caller=st.sampled_from(["instructor", "student", "nobody"]))
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_makes_a_server_error(
    case: schemathesis.Case, use_real: bool, caller: str, fuzz_world: tuple[World, int]
) -> None:
    world, submission_id = fuzz_world
    if use_real and case.path_parameters:
        real = {"course": world.course.slug, "lab": world.lab.slug, "submission_id": submission_id}
        for name in case.path_parameters:
            if name in real:
                case.path_parameters[name] = real[name]
    headers: dict[str, str] = {}
    if caller != "nobody":
        member = world.instructor if caller == "instructor" else world.student
        token = member.token
        if case.method.upper() == "DELETE":
            # Revoking must not take away the token the other cases use: give it a fresh one.
            session = new_session()
            try:
                token = create_api_token(session, user=member.user, name="fuzz")
                session.commit()
            finally:
                session.close()
        headers["Authorization"] = f"Bearer {token}"
    response = case.call(headers=headers)
    CASES_RUN[f"{case.method.upper()} {case.path}"] += 1
    STATUSES[response.status_code] += 1
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )
