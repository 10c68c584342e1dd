"""Every ORM model, imported in one place so Alembic sees the whole schema."""

from app.auth.models import SignInProblem, SignInState
from app.core.database import Base
from app.courses.models import Course, Enrollment, Extension, Lab, LeaderboardEntry
from app.fleet.models import BorrowedWorker, FleetRunner
from app.grading.models import KeptProgram, ReferenceTiming
from app.jobs.models import Worker
from app.latedays.models import LateDayCharge, LateDayEvent, LateDayReservation
from app.lti.models import (
    LtiContext,
    LtiLineItem,
    LtiPlatform,
    LtiResourceLink,
    LtiScoreSync,
    LtiToolKey,
)
from app.profiling.models import KernelProfile, ProfileReport, ReferenceProfile
from app.regrades.models import RegradeEvent, RegradeRequest
from app.rubric.models import RubricComment, RubricItem, RubricScore
from app.similarity.models import EarlierOffering, SimilarityPair, SimilarityReport
from app.sso.models import SsoProvider
from app.submissions.models import CaseResult, GradingJob, Submission, SubmissionEvent
from app.teams.models import SubmissionCredit, Team, TeamInvite, TeamMember
from app.users.models import ApiToken, Invite, User, UserIdentity

__all__ = [
    "ApiToken",
    "Base",
    "BorrowedWorker",
    "CaseResult",
    "Course",
    "EarlierOffering",
    "Enrollment",
    "Extension",
    "FleetRunner",
    "GradingJob",
    "Invite",
    "KernelProfile",
    "Lab",
    "LateDayCharge",
    "LateDayEvent",
    "LateDayReservation",
    "KeptProgram",
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
    "RegradeEvent",
    "RegradeRequest",
    "RubricComment",
    "RubricItem",
    "RubricScore",
    "SimilarityPair",
    "SimilarityReport",
    "Submission",
    "SubmissionCredit",
    "SubmissionEvent",
    "Team",
    "TeamInvite",
    "TeamMember",
    "User",
    "UserIdentity",
    "Worker",
]
