"""The README's LTI and single sign-on values, as written: the same as the code's, and a
launch with a grade through a platform set up with each LMS's values works."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.lti.grades import send_due_scores
from app.lti.launch import tool_urls
from app.lti.lms import LMSS
from app.lti.models import LtiPlatform
from app.lti.registrations import remove_registration
from app.lti.scores import note_grading
from app.lti.tool import forget_tokens
from app.sso.service import urls as sso_urls
from app.users.models import User
from tests.app.conftest import World
from tests.app.factories import make_submission
from tests.app.lti.conftest import link_course, register
from tests.app.lti.platform import INSTRUCTOR, TestPlatform

README = Path(__file__).resolve().parents[3] / "README.md"
EXAMPLE = "https://kernelgrader.example.edu"
FIELDS = {
    "Issuer": "issuer",
    "OIDC authentication URL": "auth_login_url",
    "Access token URL": "auth_token_url",
    "Key set URL": "key_set_url",
    "Token audience": "auth_audience",
}


def section(text: str, heading: str, *, whole: bool = False) -> str:
    """The text under a heading, to the next heading (of its level or above, if `whole`)."""
    start = text.index(heading + "\n")
    level = len(heading.split(" ")[0]) if whole else 6
    rest = text[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"^#{{2,{level}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def rows(text: str) -> dict[str, str]:
    return {
        name.strip(): value.strip()
        for name, value in re.findall(r"^\| ([^|]+) \| `([^`]+)` \|$", text, re.M)
    }


def readme_lms_values() -> dict[str, dict[str, str]]:
    text = section(
        README.read_text(), "## University sign-in: LMSs (LTI 1.3) and single sign-on", whole=True
    )
    found = {}
    for lms in LMSS:
        table = rows(section(text, f"#### {lms.name}"))
        found[lms.key] = {FIELDS[name]: value for name, value in table.items()}
    return found


@pytest.fixture
def example_public_url() -> Iterator[None]:
    before = os.environ.get("KERNELGRADER_PUBLIC_URL")
    os.environ["KERNELGRADER_PUBLIC_URL"] = EXAMPLE
    get_settings.cache_clear()
    yield
    if before is None:
        os.environ.pop("KERNELGRADER_PUBLIC_URL")
    else:
        os.environ["KERNELGRADER_PUBLIC_URL"] = before
    get_settings.cache_clear()


def test_the_readme_gives_each_lms_the_values_the_code_uses() -> None:
    found = readme_lms_values()
    assert set(found) == {"canvas", "moodle", "blackboard", "d2l"}
    for lms in LMSS:
        expected = {
            "issuer": lms.issuer,
            "auth_login_url": lms.auth_login_url,
            "auth_token_url": lms.auth_token_url,
            "key_set_url": lms.key_set_url,
        }
        if lms.auth_audience:
            expected["auth_audience"] = lms.auth_audience
        assert found[lms.key] == expected, lms.name


def test_the_readme_gives_kernelgraders_own_values(example_public_url: None) -> None:
    text = section(README.read_text(), "### In the LMS: kernelgrader's values")
    table = rows(text)
    urls = tool_urls("<name>")
    assert table == {
        "OpenID Connect login (initiation) URL": urls["login"],
        "Redirect URI, target link URI, launch URL": urls["launch"],
        "Deep linking (content selection) URL": urls["deep_linking"],
        "Public JWK set (key set) URL": urls["jwks"],
    }
    sso = section(README.read_text(), "### Single sign-on per institution")
    where = sso_urls("<name>")
    assert f"redirect URI `{where['redirect_uri']}`" in sso
    assert f"metadata `{where['saml_metadata']}`" in sso
    assert f"(HTTP-POST) `{where['saml_acs']}`" in sso


@pytest.mark.parametrize("key", [lms.key for lms in LMSS])
def test_a_platform_set_up_with_the_readmes_values_launches_and_takes_grades(
    key: str, session: Session, world: World, tool: str, browsers: object
) -> None:
    values = readme_lms_values()[key]
    forget_tokens()
    issuer = values["issuer"]
    lms = TestPlatform(tool_base=tool, issuer=None if "{site}" in issuer else issuer)
    # The LMS's own address stands for {site}; an LMS's fixed host is this platform's.
    site = lms.issuer if "{site}" in issuer else lms.base
    filled = {
        name: value.replace("{site}", site).replace("{client_id}", lms.client_id)
        for name, value in values.items()
    }
    for name in ("auth_login_url", "auth_token_url", "key_set_url"):
        filled[name] = lms.base + urlsplit(filled[name]).path
    lms.serve_at(
        auth=urlsplit(filled["auth_login_url"]).path,
        token=urlsplit(filled["auth_token_url"]).path,
        jwks=urlsplit(filled["key_set_url"]).path,
    )
    lms.token_audience = filled.get("auth_audience", "")
    # An LMS with a fixed issuer (Canvas's) is registered once per database: a run of this test
    # before, in the same database (as a mutation run repeats tests), leaves it registered.
    earlier = session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == filled["issuer"]))
    if earlier is not None:
        remove_registration(session, platform=earlier)
        session.commit()
    with lms:
        register(
            session,
            lms,
            name=key,
            issuer=filled["issuer"],
            auth_login_url=filled["auth_login_url"],
            auth_token_url=filled["auth_token_url"],
            key_set_url=filled["key_set_url"],
            auth_audience=filled.get("auth_audience", ""),
        )
        ada = lms.person("Ada", f"ada.{key}.{lms.client_id}@uni.example")
        teacher = lms.person("Grace", f"grace.{key}.{lms.client_id}@uni.example", INSTRUCTOR)
        course = lms.course("GPU", ada, teacher)
        link_course(browsers(), lms, teacher, course, world)  # type: ignore[operator]
        link = lms.link(course, "Scale", {"lab": world.lab.slug})
        landed = browsers().launch(lms, ada, link=link)  # type: ignore[operator]
        assert landed.location.endswith(f"/labs/{world.lab.slug}"), landed.response.text[:2000]
        user = session.scalar(select(User).where(User.email == ada.email))
        submission, _ = make_submission(session, user=user, lab=world.lab, score=4.0)  # type: ignore[arg-type]
        note_grading(session, submission=submission)
        session.commit()
        report = send_due_scores(course_id=world.course.id)
        assert report.sent and report.columns_made, report
        assert next(iter(course.line_items.values())).grades == {ada.sub: 4.0}
        assert lms.token_audiences and set(lms.token_audiences) == {
            lms.token_audience or lms.url("token")
        }
