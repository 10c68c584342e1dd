"""Deep linking: the instructor picks a lab in kernelgrader, and the LMS gets a link to it.

The link carries the lab in its custom parameters (`lab=<id>`), so every later launch of it
lands on the lab. It asks the LMS to make a grade column only when the lab has none in this
LMS course yet: a second link to the same lab (or the same link placed again) reuses the
column the first one made, and the LMS gets no duplicate.
"""

from __future__ import annotations

from typing import Any

from pylti1p3.deep_link import DeepLink
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.lineitem import LineItem
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Lab
from app.lti import scores
from app.lti.grades import TAG
from app.lti.launch import DEEP_LINKING, DEPLOYMENT, tool_urls
from app.lti.models import LtiContext, LtiLineItem, LtiPlatform
from app.lti.tool import registration_of
from app.rubric.service import points_possible


def response_for(
    session: Session, *, pending: dict[str, Any], context: LtiContext, lab: Lab
) -> tuple[str, str]:
    """The LMS's return URL and the signed deep-linking response naming this lab."""
    platform = session.get_one(LtiPlatform, context.platform_id)
    claims = pending["claims"]
    settings = dict(claims.get(DEEP_LINKING) or {})
    resource = (
        DeepLinkResource()
        .set_url(tool_urls()["launch"])
        .set_title(lab.title)
        .set_custom_params({"lab": lab.slug})
    )
    has_column = session.scalar(
        select(LtiLineItem.id).where(
            LtiLineItem.context_id == context.id, LtiLineItem.lab_id == lab.id
        )
    )
    if not has_column:
        resource.set_lineitem(
            LineItem()
            .set_label(lab.title)
            .set_score_maximum(points_possible(session, labs=[lab])[lab.id])
            .set_resource_id(lab.slug)
            .set_tag(TAG)
        )
        # The LMS makes it with the link; its URL arrives with the link's first launch.
        scores.want_line_item(session, context=context, lab=lab)
    link = DeepLink(registration_of(session, platform), str(claims.get(DEPLOYMENT, "")), settings)  # type: ignore[arg-type]
    return str(settings["deep_link_return_url"]), link.get_response_jwt([resource])
