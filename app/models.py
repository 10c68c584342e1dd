"""Every ORM model, imported in one place so Alembic sees the whole schema."""

from app.auth.models import SignInProblem, SignInState, UserIdentity
from app.core.database import Base
from app.courses.models import Course, Enrollment, Extension, Lab, LeaderboardEntry
from app.fleet.models import Worker
from app.grading.models import CaseResult, GradingJob, ReferenceTiming
from app.lti.models import (
    LtiContext,
    LtiLineItem,
    LtiPlatform,
    LtiResourceLink,
    LtiScoreSync,
    LtiToolKey,
)
from app.profiling.models import KernelProfile, ProfileReport, ReferenceProfile
from app.sso.models import SsoProvider
from app.submissions.models import Submission, SubmissionEvent
from app.users.models import ApiToken, Invite, User

__all__ = [
    "ApiToken",
    "Base",
    "CaseResult",
    "Course",
    "Enrollment",
    "Extension",
    "GradingJob",
    "Invite",
    "KernelProfile",
    "Lab",
    "LeaderboardEntry",
    "ProfileReport",
    "ReferenceProfile",
    "LtiContext",
    "LtiLineItem",
    "LtiPlatform",
    "LtiResourceLink",
    "LtiScoreSync",
    "LtiToolKey",
    "ReferenceTiming",
    "SignInProblem",
    "SignInState",
    "SsoProvider",
    "Submission",
    "SubmissionEvent",
    "User",
    "UserIdentity",
    "Worker",
]
