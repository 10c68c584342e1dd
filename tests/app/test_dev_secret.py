"""No server signs login cookies with a key anybody can read (issue 31, class 16).

`kernelgrader serve` as the README starts it (development, no KERNELGRADER_SECRET_KEY), in a
process of its own on loopback: a login cookie forged with the public development default
logs nobody in, while one signed with the key the install made for itself (kept in its data
folder, readable by its owner only) does, which shows the forgery is made right. `serve` on an
address others reach refuses a short or public secret before it listens.
"""

from __future__ import annotations

import base64
import json
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from itsdangerous import TimestampSigner

from app.core.settings import DEV_GRADING_SECRET, DEV_SECRET_KEY, SECRET_KEY_FILE
from tests.app.test_serve import bare_environment, serving

pytestmark = pytest.mark.slow


def forged(secret: str, session: dict[str, object]) -> str:
    """A login cookie as Starlette's session middleware signs one."""
    data = base64.b64encode(json.dumps(session).encode())
    return TimestampSigner(secret).sign(data).decode()


def test_a_cookie_forged_with_the_public_default_logs_nobody_in(tmp_path: Path) -> None:
    with serving(tmp_path, bare_environment(tmp_path), "--no-local-worker") as (base, log):
        assert "log in as instructor@example.com" in log.read_text(), log.read_text()
        kept = tmp_path / "var" / SECRET_KEY_FILE
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        key = kept.read_text().strip()
        assert len(key) >= 32 and key != DEV_SECRET_KEY
        # The demo instructor is the first account.
        for secret, signed_in in ((DEV_SECRET_KEY, False), (key, True)):
            cookie = forged(secret, {"user_id": 1})
            page = httpx.get(f"{base}/account", cookies={"kernelgrader_session": cookie})
            assert (page.status_code == 200) is signed_in, (secret, page.status_code)
            assert ("instructor@example.com" in page.text) is signed_in


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"KERNELGRADER_SECRET_KEY": "short"}, "KERNELGRADER_SECRET_KEY and"),
        (
            {
                "KERNELGRADER_SECRET_KEY": "s" * 40,
                "KERNELGRADER_GRADING_SECRET": DEV_GRADING_SECRET,
            },
            "KERNELGRADER_GRADING_SECRET is unset, short or a public default",
        ),
    ],
)
def test_serve_on_an_address_others_reach_refuses_a_guessable_secret(
    tmp_path: Path, extra: dict[str, str], named: str
) -> None:
    # An address of the documentation range (RFC 5737), not loopback: were it not refused,
    # uvicorn could not listen there either, so no test ever opens a server to the network.
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--host", "192.0.2.1", "--port", "8000"],
        env=bare_environment(tmp_path, **extra),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert named in done.stderr and "--host 192.0.2.1 lets others reach" in done.stderr
    assert "Traceback" not in done.stderr
