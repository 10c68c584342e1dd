"""One account per person, and never one person's account for another: an outside identity is
matched with its issuer (two LMSs' identical subject ids are two people), and an email that no
one vouches for joins no existing account."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.accounts import NO_EMAIL_DOMAIN, OutsideIdentity, account_for
from app.courses.models import Enrollment
from app.users.models import User, UserIdentity
from tests.app.conftest import World, unique
from tests.app.lti.conftest import registered_and_linked
from tests.app.lti.platform import TestPlatform


def _users_with(session: Session, email: str) -> list[int]:
    session.expire_all()
    return list(session.scalars(select(User.id).where(User.email == email)))


def test_two_lmss_with_the_same_subject_id_are_two_people(
    session: Session, world: World, lms: TestPlatform, tool: str, browsers: object
) -> None:
    ada = lms.person("Ada", f"{unique('ada')}@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    assert browsers().launch(lms, ada, link=link).location.endswith(world.lab.slug)  # type: ignore[operator]
    with TestPlatform(tool_base=tool) as second:
        # Another LMS that happens to number its users the same way.
        bob = second.person("Bob", f"{unique('bob')}@other.example")
        del second.people[bob.sub]
        bob.sub = ada.sub
        second.people[bob.sub] = bob
        theirs = second.course("GPU", bob)
        registered_and_linked(session, world, second, theirs, tool)
        there = second.link(theirs, "Scale", {"lab": world.lab.slug})
        landed = browsers().launch(second, bob, link=there)  # type: ignore[operator]
        assert landed.location.endswith(world.lab.slug), landed.response.text[:2000]
        page = landed.browser.page(landed.location)
        assert bob.email in page and ada.email not in page
    (ada_id,) = _users_with(session, ada.email)
    (bob_id,) = _users_with(session, bob.email)
    assert ada_id != bob_id
    identities = dict(
        session.execute(
            select(UserIdentity.issuer, UserIdentity.user_id).where(UserIdentity.subject == ada.sub)
        ).all()
    )
    assert identities == {lms.issuer: ada_id, second.issuer: bob_id}
    # Each is in the course once, as themself.
    enrolled = session.scalars(
        select(Enrollment.user_id).where(Enrollment.course_id == world.course.id)
    ).all()
    assert enrolled.count(ada_id) == 1 and enrolled.count(bob_id) == 1


def test_an_email_no_one_vouches_for_joins_no_account(session: Session, world: World) -> None:
    owner = world.student.user
    identity = OutsideIdentity(
        kind="oidc",
        issuer="https://idp.example/untrusted",
        subject=unique("sub"),
        email=owner.email.upper(),
        name="Someone",
        email_trusted=False,
    )
    matched = account_for(session, identity)
    session.commit()
    assert matched.created and not matched.linked
    assert matched.user.id != owner.id
    # Not even as an address: the new account's is a placeholder no one can sign in with.
    assert matched.user.email.endswith("@" + NO_EMAIL_DOMAIN)
    assert _users_with(session, owner.email) == [owner.id]
    assert session.scalars(select(UserIdentity).where(UserIdentity.user_id == owner.id)).all() == []
    # The same identity comes back to the same new account, still apart from the owner's.
    again = account_for(session, identity)
    assert (again.user.id, again.created) == (matched.user.id, False)
    # Vouched for, by another identity: that one joins the owner's account.
    trusted = OutsideIdentity(
        kind="oidc",
        issuer="https://idp.example/trusted",
        subject=unique("sub"),
        email=owner.email,
        email_trusted=True,
    )
    joined = account_for(session, trusted)
    assert (joined.user.id, joined.created, joined.linked) == (owner.id, False, True)


def test_two_identity_providers_with_the_same_subject_are_two_people(session: Session) -> None:
    """As the sign-in routes call it (app.sso.service.sign_in): the same `sub` from two
    universities' providers names two people."""
    from app.sso.service import sign_in

    subject = unique("sub")
    first = sign_in(
        session,
        OutsideIdentity(
            kind="oidc",
            issuer="https://idp.one.example",
            subject=subject,
            email=f"{unique('one')}@one.example",
            email_trusted=True,
        ),
    )
    second = sign_in(
        session,
        OutsideIdentity(
            kind="oidc",
            issuer="https://idp.two.example",
            subject=subject,
            email=f"{unique('two')}@two.example",
            email_trusted=True,
        ),
    )
    session.commit()
    assert first.id != second.id
    assert first.email.endswith("@one.example") and second.email.endswith("@two.example")
    # And each comes back to their own, whatever email their provider sends later.
    again = sign_in(
        session,
        OutsideIdentity(
            kind="oidc", issuer="https://idp.two.example", subject=subject, email_trusted=True
        ),
    )
    assert again.id == second.id
