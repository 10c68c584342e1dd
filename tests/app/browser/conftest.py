"""Browser tests: a real `kernelgrader serve` (SQLite, a compile-only local worker) on
loopback, driven by Playwright in the system's Chromium (Debian's `chromium`).

Playwright cannot download a browser here, so it is pointed at the installed one
(`KERNELGRADER_CHROMIUM`, else `chromium` on PATH). Without one the tests skip with the reason;
under CI (`CI=true`) they fail instead, like the scaled-setup tests without their servers.
Screenshots go to `KERNELGRADER_SCREENSHOTS` (default: a fresh temporary folder), printed at the
end of the run.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from tests.app.browser.seed import PASSWORD, People, seed

CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_SCREENSHOTS: list[Path] = []


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"browser tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(f"browser tests need Chromium and Playwright: {reason}")


def chromium_path() -> str:
    given = os.environ.get("KERNELGRADER_CHROMIUM")
    found = given or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found or not Path(found).exists():
        _unavailable(
            "no Chromium found (install Debian's `chromium` with apt, or set "
            "KERNELGRADER_CHROMIUM to its path)"
        )
    assert found is not None
    return found


def screenshot_dir() -> Path:
    if not _SCREENSHOTS:
        given = os.environ.get("KERNELGRADER_SCREENSHOTS")
        folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="kernelgrader-shots-"))
        folder.mkdir(parents=True, exist_ok=True)
        _SCREENSHOTS.append(folder)
    return _SCREENSHOTS[0]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SCREENSHOTS:
        terminalreporter.write_line(f"browser screenshots: {_SCREENSHOTS[0]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    base: str
    people: People
    ids: dict[str, int]
    db_url: str
    log: Path

    def session(self) -> Session:
        from app.core.database import engine_for

        return Session(bind=engine_for(self.db_url), expire_on_commit=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    chromium_path()  # skip (or fail under CI) before starting anything
    try:
        import playwright  # noqa: F401
    except ImportError as exc:
        _unavailable(f"Playwright is not installed ({exc})")
    folder = tmp_path_factory.mktemp("browser-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    env.update(
        KERNELGRADER_DATA_DIR=str(folder / "var"),
        KERNELGRADER_RUN_ON_GPU="false",
        KERNELGRADER_BROKER_POLLING_SECONDS="0.1",
        KERNELGRADER_SWEEP_SECONDS="0.5",
    )
    port = _free_port()
    # Its own address: LTI's launch URL and invite links start with it.
    env["KERNELGRADER_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
    log = folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=folder,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert process.poll() is None, log.read_text()
        assert re.search(r"created the course 'demo'", log.read_text()), log.read_text()
        db_url = f"sqlite:///{folder / 'var' / 'kernelgrader.sqlite'}"
        server = Server(base=base, people=None, ids={}, db_url=db_url, log=log)  # type: ignore[arg-type]
        with server.session() as session:
            server.people, server.ids = seed(session)
            session.commit()
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    text = log.read_text()
    assert "Traceback" not in text, text


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Visitor:
    """One person in their own browser context (cookies), with helpers the tests share."""

    def __init__(self, browser: Any, server: Server, *, width: int = 1280, height: int = 900):
        self.server = server
        self.context = browser.new_context(
            viewport={"width": width, "height": height}, accept_downloads=True
        )
        self.outside: list[str] = []
        # Anything the pages fetch from elsewhere is refused and recorded: nothing may need it.
        self.context.route(re.compile(r"^(?!http://127\.0\.0\.1)"), self._refuse)
        self.page = self.context.new_page()

    def _refuse(self, route: Any) -> None:
        self.outside.append(route.request.url)
        route.abort()

    def go(self, path: str) -> Any:
        response = self.page.goto(self.server.base + path)
        assert response is not None and response.status < 400, (path, response and response.status)
        return response

    def login(self, email: str) -> None:
        self.page.goto(self.server.base + "/login")
        self.page.fill("#email", email)
        self.page.fill("#password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_load_state()
        assert "/login" not in self.page.url, self.page.content()[:2000]

    def shot(self, name: str, *, full_page: bool = True) -> Path:
        path = screenshot_dir() / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def sideways_overflow(self) -> int:
        """How many CSS pixels the page is wider than the window (0: no sideways scroll)."""
        return int(
            self.page.evaluate(
                "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
                " - window.innerWidth"
            )
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visitor(browser: Any, server: Server) -> Iterator[Any]:
    made: list[Visitor] = []

    def make(**kwargs: Any) -> Visitor:
        v = Visitor(browser, server, **kwargs)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()
