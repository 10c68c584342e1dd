"""The service's fixtures (database, client, world) for the hostile HTTP tests.

A bare GPU host has no web stack; there only the hostile-kernel tests run, without these.
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):
    from tests.app.conftest import (  # noqa: F401 - fixtures are found by name
        anyio_backend,
        client,
        database,
        session,
        world,
    )
