"""What a worker started as root says once, at its start, about its sandbox.

Celery warns a root worker in words that do not fit here ("specify a different user using the
--uid option", an option `kernelgrader worker` does not have) and says nothing of the sandbox.
So a root worker says instead what root means for the sandbox (graders.sandbox.isolation:
whether the compiler's children can drop to an unprivileged user, and that a kernel's run stays
the worker's user) and what to do; only that one warning of Celery's is left out, every other
warning still shows.
"""

from __future__ import annotations

import os
import sys
import warnings

from celery.exceptions import SecurityWarning

from graders.sandbox.isolation import SANDBOX_USER_ENV, unprivileged_user

# The start of Celery's warning to a worker run as root (celery.platforms.ROOT_DISCOURAGED).
CELERY_ROOT_WARNING = r"You're running the worker with superuser privileges"


def as_root_sentence() -> str | None:
    """For a worker run as root: what that means for its sandbox, and what to do; else None."""
    if os.geteuid() != 0:
        return None
    creds, why = unprivileged_user()
    if creds is not None:
        return (
            "This worker runs as root. Its sandbox compiles each kernel as the unprivileged "
            f"user {creds.name} (uid {creds.uid}); running a kernel on the GPU stays root, "
            "in a namespace with no network and under time and memory limits, so a hole in "
            "that sandbox would be root's. For a course, run the worker as an ordinary user "
            "that may open the GPU (the Docker worker image does)."
        )
    return (
        f"This worker runs as root, and its sandbox cannot drop privileges ({why}): students' "
        "kernels are compiled and run as root, each in a namespace with no network and under "
        "time and memory limits, so a hole in that sandbox would be root's. Run the worker as "
        "an ordinary user; or, to have the compiler drop to an unprivileged user, install "
        f"kernelgrader where that user can run {sys.executable} (not under /root) and set "
        f"{SANDBOX_USER_ENV} to that user (nobody by default)."
    )


def leave_out_celerys_root_warning() -> None:
    """Celery's warning to a root worker only; the sentence above says it for this worker."""
    warnings.filterwarnings("ignore", message=CELERY_ROOT_WARNING, category=SecurityWarning)
