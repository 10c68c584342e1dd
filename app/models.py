"""Every ORM model, imported in one place so Alembic sees the whole schema."""

from app.core.database import Base
from app.courses.models import Course, Enrollment, Lab
from app.grading.models import CaseResult, GradingJob, ReferenceTiming
from app.submissions.models import Submission, SubmissionEvent
from app.users.models import ApiToken, User

__all__ = [
    "ApiToken",
    "Base",
    "CaseResult",
    "Course",
    "Enrollment",
    "GradingJob",
    "Lab",
    "ReferenceTiming",
    "Submission",
    "SubmissionEvent",
    "User",
]
