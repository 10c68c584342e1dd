"""Time "forgot password" for an address with an account and for one without.

The request only hands the address to the reset thread (app.users.resets), so the two cases do
the same work; this prints their times side by side, to see that it holds in practice. The app
runs in process (httpx's ASGI transport) on a fresh SQLite file, with a real SMTP sink on
loopback (aiosmtpd, from the dev extra) taking the mails the reset thread sends.

    python bench/forgot_password.py [--requests 200]

Each case is asked in turn, each time for a new address (throttles cleared between requests:
they count per address and per client), the first case of a round alternating. Two figures per
case: the request's own time, with the reset and mail threads idle before it; and the time of
a second request sent right after it (for an address without an account, not waiting), which
shows what the background work of the first (a lookup; for an account also a link's write and
a mail) costs a request that follows it on the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATA = Path(tempfile.mkdtemp(prefix="kernelgrader-bench-forgot-"))
os.environ.update(
    KERNELGRADER_ENV="test",
    KERNELGRADER_DATA_DIR=str(DATA),
    KERNELGRADER_DATABASE_URL=f"sqlite:///{DATA / 'bench.sqlite'}",
    KERNELGRADER_BROKER_URL=f"sqla+sqlite:///{DATA / 'broker.sqlite'}",
    KERNELGRADER_SECRET_KEY="bench-secret-key-not-for-production",
    KERNELGRADER_GRADING_SECRET="bench-grading-secret",
)


def _summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    tenth, ninetieth = ordered[len(ordered) // 10], ordered[(len(ordered) * 9) // 10]
    return (
        f"{name:<26} median {statistics.median(values):6.2f} ms   p10 {tenth:6.2f}   "
        f"p90 {ninetieth:6.2f}   n {len(values)}"
    )


async def _measure(requests: int) -> tuple[dict[str, list[float]], int]:
    import httpx

    from app.core.database import session_scope
    from app.core.mail import outbox
    from app.main import create_app
    from app.users.resets import reset_requests
    from app.users.service import ensure_user

    with session_scope() as session:
        known = [ensure_user(session, email=f"bench{i}@example.edu").email for i in range(requests)]
    app = create_app()
    throttles = [app.state.reset_throttle, app.state.reset_address_throttle]
    transport = httpx.ASGITransport(app=app)
    times: dict[str, list[float]] = {
        "with": [],
        "without": [],
        "after with": [],
        "after without": [],
    }

    async def idle() -> None:
        await asyncio.to_thread(reset_requests.wait_until_done)
        await asyncio.to_thread(outbox.wait_until_sent)

    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        page = await client.get("/password/forgot")
        found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert found, "the page has no form: is mail on?"

        async def ask(email: str) -> float:
            for throttle in throttles:
                throttle.clear()
            started = time.perf_counter()
            answer = await client.post(
                "/password/forgot", data={"email": email, "csrf_token": found.group(1)}
            )
            assert answer.status_code == 200, answer.text
            return (time.perf_counter() - started) * 1000

        for i in range(requests):
            cases = [("with", known[i]), ("without", f"nobody{i}@example.edu")]
            for case, email in cases if i % 2 == 0 else cases[::-1]:
                await idle()
                times[case].append(await ask(email))
                times[f"after {case}"].append(await ask(f"probe{case[:2]}{i}@example.edu"))
        await idle()
    await asyncio.to_thread(outbox.wait_until_sent)
    return times, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    from app.cli.database import upgrade_database
    from app.core.settings import get_settings
    from tests.app.mail.smtp import smtp_server

    with smtp_server() as inbox:
        settings = get_settings()
        settings.smtp_host, settings.smtp_port = inbox.host, inbox.port
        settings.smtp_security, settings.smtp_from = "none", "bench <bench@example.edu>"
        upgrade_database()
        times, asked = asyncio.run(_measure(args.requests))
        mails = len(inbox.messages)
    print("the request itself, background idle before it:")
    print(_summary("  address with account", times["with"]))
    print(_summary("  address without", times["without"]))
    difference = statistics.median(times["with"]) - statistics.median(times["without"])
    print(f"  difference of medians {difference:+.2f} ms")
    print("a second request sent right after it:")
    print(_summary("  after one with account", times["after with"]))
    print(_summary("  after one without", times["after without"]))
    difference = statistics.median(times["after with"]) - statistics.median(times["after without"])
    print(f"  difference of medians {difference:+.2f} ms")
    print(f"{mails} mails for {asked} addresses with an account")


if __name__ == "__main__":
    main()
