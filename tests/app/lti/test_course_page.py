"""LMS registrations are the site administrators' (/admin/lti); a course's LMS page shows its
staff which LMSs exist and the LMS courses linked to their course, never the credentials."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.lti.models import LtiContext, LtiPlatform, LtiToolKey
from app.users.models import User
from tests.app.conftest import World, make_member, unique
from tests.app.lti.conftest import Browser, log_in, registered_and_linked
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
    assert "is not a web address; copy it from the LMS" in admin.page(bad.headers["location"])
    done = admin.http.post(tool + "/admin/lti", data=form)
    assert f"{tool}/lti/jwks/{lms.slug}" in admin.page(done.headers["location"])
    # One issuer, one registration: a second one for it (another client id) is refused.
    again = admin.http.post(
        tool + "/admin/lti", data={**form, "slug": unique("other"), "client_id": "another"}
    )
    assert f"The registration {lms.slug} owns the issuer" in admin.page(again.headers["location"])

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
