"""LMS registrations are the site administrators' (/admin/lti); a course's LMS page shows its
staff which LMSs exist and the LMS courses linked to their course, never the credentials."""

from __future__ import annotations

import html

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Enrollment
from app.lti.models import LtiContext, LtiLineItem, LtiPlatform, LtiToolKey
from app.submissions.models import Submission
from app.users.models import User, UserIdentity
from tests.app.conftest import World, make_member, unique
from tests.app.factories import make_submission
from tests.app.lti.conftest import Browser, counts, log_in, register, registered_and_linked
from tests.app.lti.platform import TestPlatform


def _site_admin(session: Session) -> User:
    from app.courses.models import Role

    admin = make_member(session, None, Role.student).user
    admin.is_site_admin = True
    session.commit()
    return admin


def test_a_site_administrator_registers_an_lms_and_it_gets_its_own_key_set(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    admin = browsers()  # type: ignore[operator]
    log_in(admin, _site_admin(session).email)
    assert 'id="site-admin"' in admin.page("/account")  # the header links the page
    # A site administrator is staff of no course by that.
    assert admin.get(f"/courses/{world.course.slug}/lti").status_code == 403
    assert admin.get(f"/courses/{world.course.slug}/gradebook").status_code == 403
    page = admin.page("/admin/lti")
    assert f"{tool}/lti/jwks/{{slug}}" in page and f"{tool}/lti/login" in page
    assert "https://sso.canvaslms.com/api/lti/authorize_redirect" in page  # the LMS hints
    form = {**lms.values(), "slug": lms.slug, "csrf_token": admin.csrf("/admin/lti")}

    bad = admin.http.post(tool + "/admin/lti", data={**form, "key_set_url": "not a url"})
    assert bad.status_code == 422 and "is not a web address; copy it from the LMS" in bad.text
    done = admin.http.post(tool + "/admin/lti", data=form)
    assert f"{tool}/lti/jwks/{lms.slug}" in admin.page(done.headers["location"])
    # One issuer, one registration: a second one for it (another client id) is refused.
    again = admin.http.post(
        tool + "/admin/lti", data={**form, "slug": unique("other"), "client_id": "another"}
    )
    assert again.status_code == 422 and f"The registration {lms.slug} owns the issuer" in again.text

    session.expire_all()
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.slug == lms.slug))
    assert platform is not None and platform.deployment_ids == [lms.deployment_id]
    own = session.scalars(select(LtiToolKey).where(LtiToolKey.platform_id == platform.id)).all()
    keys = admin.get(f"/lti/jwks/{lms.slug}").json()["keys"]
    assert [k["kid"] for k in keys] == [k.kid for k in own] and len(own) == 1
    assert all(k["kty"] == "RSA" and k["alg"] == "RS256" and "d" not in k for k in keys)
    assert admin.get("/lti/jwks/no-such-registration").status_code == 404

    # Rotating: a new key, the old one listed an hour more.
    rotated = admin.http.post(
        tool + f"/admin/lti/{lms.slug}/rotate-key", data={"csrf_token": admin.csrf("/admin/lti")}
    )
    assert "signs with a new key" in admin.page(rotated.headers["location"])
    assert len(admin.get(f"/lti/jwks/{lms.slug}").json()["keys"]) == 2


def test_course_staff_see_which_lmss_exist_and_their_links_but_register_nothing(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    ada = lms.person("Ada", "ada.page@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    path = f"/courses/{world.course.slug}/lti"

    teacher = browsers()  # type: ignore[operator]
    log_in(teacher, world.instructor.email)
    page = teacher.page(path)
    assert "Test LMS" in page and lms.issuer in page  # which LMSs exist
    assert lms.client_id not in page and lms.deployment_id not in page  # not their credentials
    assert 'id="register"' not in page and "GPU" in page  # its linked LMS course
    assert 'id="site-admin"' not in teacher.page("/account")
    # The registration pages and their forms are refused to a course's instructor.
    assert teacher.get("/admin/lti").status_code == 403
    assert teacher.get("/admin/sign-in").status_code == 403
    refused = teacher.http.post(
        tool + "/admin/lti",
        data={**lms.values(), "slug": unique("mine"), "csrf_token": teacher.csrf(path)},
    )
    assert refused.status_code == 403
    changed = teacher.http.post(
        tool + f"/admin/lti/{lms.slug}",
        data={
            **lms.values(),
            "key_set_url": "https://evil.example/jwks",
            "csrf_token": teacher.csrf(path),
        },
    )
    assert changed.status_code == 403
    assert (
        teacher.http.post(
            tool + f"/admin/lti/{lms.slug}/rotate-key", data={"csrf_token": teacher.csrf(path)}
        ).status_code
        == 403
    )

    ta = browsers()  # type: ignore[operator]
    log_in(ta, world.ta.email)
    assert "GPU" in ta.page(path) and "Unlink" not in ta.page(path)
    session.expire_all()
    context = session.scalar(select(LtiContext).where(LtiContext.context_id == course.id))
    assert context is not None
    assert (
        ta.http.post(
            tool + path + "/unlink", data={"context": str(context.id), "csrf_token": ta.csrf(path)}
        ).status_code
        == 403
    )
    student = browsers()  # type: ignore[operator]
    log_in(student, world.student.email)
    assert student.get(path).status_code == 403

    # The instructor unlinks it: its launches then land nowhere.
    gone = teacher.http.post(
        tool + path + "/unlink", data={"context": str(context.id), "csrf_token": teacher.csrf(path)}
    )
    assert "Unlinked GPU" in teacher.page(gone.headers["location"])
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    landed = Browser(tool).launch(lms, ada, link=link)
    assert landed.response.status_code == 400
    assert "not connected to a kernelgrader course yet" in landed.response.text


def test_a_removed_registrations_launches_are_refused_and_what_it_made_is_stated(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Removing an LMS registration (a site administrator, on /admin/lti): its launches are
    refused from then on, even one begun before; its key set, LMS course links, grade columns
    and LMS sign-ins go; the accounts it made, their enrolments and submissions stay. Made
    again with the same issuer, it reaches no course until an instructor links one again."""
    ada = lms.person("Ada", f"{unique('ada')}@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    student = browsers()  # type: ignore[operator]
    assert student.launch(lms, ada, link=link).response.status_code == 303
    session.expire_all()
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.slug == lms.slug))
    assert platform is not None
    account = session.scalar(select(User).where(User.email == ada.email))
    assert account is not None
    make_submission(session, user=account, lab=world.lab)
    session.commit()
    account_id, platform_id = account.id, platform.id
    # A launch begun before the removal: its login is done, its id_token not yet posted.
    late = browsers()  # type: ignore[operator]
    action, fields = late.start(lms, ada, link=link)

    admin = browsers()  # type: ignore[operator]
    log_in(admin, _site_admin(session).email)
    page = admin.page("/admin/lti")
    assert f'id="remove-{lms.slug}"' in page and "Its launches are refused" in page
    gone = admin.http.post(
        tool + f"/admin/lti/{lms.slug}/remove", data={"csrf_token": admin.csrf("/admin/lti")}
    )
    said = html.unescape(admin.page(gone.headers["location"]))
    assert f"Removed {lms.slug}, with its 1 LMS courses' links and 2 LMS sign-ins" in said
    assert "accounts and submissions stay" in said

    before = counts(session)
    refused = late.post(action, fields)
    assert refused.status_code == 400 and "kernelgrader" in refused.text
    assert student.get(f"/courses/{world.course.slug}").status_code == 200  # still logged in
    fresh = browsers()  # type: ignore[operator]
    answer = fresh.http.get(lms.login_initiation(ada, link=link))
    assert answer.status_code == 400 and "This LMS is not registered" in answer.text
    assert counts(session) == before  # nothing made by either
    assert admin.get(f"/lti/jwks/{lms.slug}").status_code == 404

    session.expire_all()
    assert session.get(User, account_id) is not None
    assert session.scalar(
        select(Enrollment.role).where(
            Enrollment.user_id == account_id, Enrollment.course_id == world.course.id
        )
    )
    assert session.scalar(select(Submission.id).where(Submission.user_id == account_id))
    for model in (LtiContext, LtiToolKey, UserIdentity):
        left = session.scalars(select(model).where(model.platform_id == platform_id)).all()
        assert left == [], model
    assert (
        session.scalars(select(LtiLineItem).where(LtiLineItem.lab_id == world.lab.id)).all() == []
    )

    # Registered again (the same issuer): its LMS course opens nothing until it is linked.
    register(session, lms)
    again = browsers()  # type: ignore[operator]
    landed = again.launch(lms, ada, link=link)
    assert landed.response.status_code == 400
    assert "not connected to a kernelgrader course yet" in landed.response.text


def test_the_registration_form_keeps_all_eight_fields_and_names_every_problem(
    session: Session, tool: str, lms: TestPlatform, browsers: object
) -> None:
    admin = browsers()  # type: ignore[operator]
    log_in(admin, _site_admin(session).email)
    typed = {
        **lms.values(),
        "client_id": "",
        "auth_login_url": "sso.example/authorize",
        "key_set_url": "not a url",
        "auth_audience": "https://api.brightspace.com/auth/token",
        "slug": "Bad Name",
    }
    answer = admin.http.post(
        tool + "/admin/lti", data={**typed, "csrf_token": admin.csrf("/admin/lti")}
    )
    assert answer.status_code == 422
    page = html.unescape(answer.text)
    assert "4 problems to fix:" in page  # the summary every form has (app.web.forms)
    for sentence in (
        "'bad name' is not a registration name",
        "The client id is missing",
        "The OIDC authentication URL 'sso.example/authorize' is not a web address",
        "The key set URL 'not a url' is not a web address",
    ):
        assert sentence in page, sentence
    # Every field comes back as typed (the empty one empty), each problem beside its field.
    for name, value in typed.items():
        assert f'id="new-{name}" name="{name}" value="{value}"' in page, name
    for name in ("slug", "client_id", "auth_login_url", "key_set_url"):
        assert f'aria-describedby="new-{name}-error"' in page, name
        assert f'<a href="#new-{name}">' in page, name
    assert 'id="new-client_id-error">The client id is missing' in page
    assert 'id="new-issuer-error"' not in page
    session.expire_all()
    assert session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == lms.issuer)) is None

    # A registration's "Change" form likewise: opened again, what was typed kept.
    register(session, lms)
    changed = {**lms.values(), "deployment_ids": " , ", "auth_token_url": "ftp://x"}
    answer = admin.http.post(
        tool + f"/admin/lti/{lms.slug}", data={**changed, "csrf_token": admin.csrf("/admin/lti")}
    )
    assert answer.status_code == 422
    page = html.unescape(answer.text)
    assert "2 problems to fix:" in page and page.count("<details open>") == 1
    for name, value in changed.items():
        assert f'id="change-{lms.slug}-{name}" name="{name}" value="{value}"' in page, name
    for name in ("deployment_ids", "auth_token_url"):
        assert f'<a href="#change-{lms.slug}-{name}">' in page, name
        assert f'id="change-{lms.slug}-{name}-error"' in page, name
    assert 'id="new-auth_token_url" name="auth_token_url" value=""' in page  # the other form
    session.expire_all()
    kept = session.scalar(select(LtiPlatform).where(LtiPlatform.slug == lms.slug))
    assert kept is not None and kept.auth_token_url == lms.values()["auth_token_url"]


def test_the_lms_pages_warn_when_the_public_address_cannot_work_for_an_lms(
    session: Session, world: World, tool: str, browsers: object
) -> None:
    """The tool's address here is http://127.0.0.1:<port>: plain http and this machine."""
    admin = browsers()  # type: ignore[operator]
    log_in(admin, _site_admin(session).email)
    teacher = browsers()  # type: ignore[operator]
    log_in(teacher, world.instructor.email)
    host = tool.split("//")[1].split(":")[0]
    course_lms = f"/courses/{world.course.slug}/lti"
    for who, path in ((admin, "/admin/lti"), (admin, "/admin/sign-in"), (teacher, course_lms)):
        page = html.unescape(who.page(path))
        assert 'id="address-problem"' in page, path
        assert f"This server's public address is {tool} (KERNELGRADER_PUBLIC_URL)" in page
        assert "it is plain http, and an LMS or identity provider needs https" in page
        assert f"{host} is this machine itself" in page
    # The course's staff reach the LMS page from the course's staff menu; site administrators
    # reach both of theirs from each other.
    assert f'href="/courses/{world.course.slug}/lti"' in teacher.page(
        f"/courses/{world.course.slug}"
    )
    assert 'href="/admin/sign-in"' in admin.page("/admin/lti")
    assert 'href="/admin/lti"' in admin.page("/admin/sign-in")
