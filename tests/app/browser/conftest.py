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
from tests.app.mail.smtp import Inbox, smtp_server

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


def axe_path() -> Path:
    """axe-core's browser bundle, installed from the npm registry by scripts/ci-browser.sh."""
    given = os.environ.get("KERNELGRADER_AXE")
    root = Path(__file__).resolve().parents[3]
    path = Path(given) if given else root / ".cache/npm/node_modules/axe-core/axe.min.js"
    if not path.is_file():
        _unavailable(f"axe-core is not installed at {path} (run scripts/ci-browser.sh)")
    return path


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
    mail: Inbox | None = None

    def session(self) -> Session:
        from app.core.database import engine_for

        return Session(bind=engine_for(self.db_url), expire_on_commit=False)


@pytest.fixture(scope="module")
def mail(request: pytest.FixtureRequest) -> Iterator[Inbox | None]:
    """A real SMTP server on loopback for the module's server, where the module sets
    `MAIL = True`; None (the server sends no mail) otherwise."""
    if not getattr(request.module, "MAIL", False):
        yield None
        return
    with smtp_server() as inbox:
        yield inbox


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, mail: Inbox | None) -> Iterator[Server]:
    chromium_path()  # skip (or fail under CI) before starting anything
    try:
        import playwright  # noqa: F401
    except ImportError as exc:
        _unavailable(f"Playwright is not installed ({exc})")
    folder = tmp_path_factory.mktemp("browser-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    port = _free_port()
    env.update(
        KERNELGRADER_DATA_DIR=str(folder / "var"),
        KERNELGRADER_RUN_ON_GPU="false",
        KERNELGRADER_BROKER_POLLING_SECONDS="0.1",
        KERNELGRADER_SWEEP_SECONDS="0.5",
        # Its own address: LTI's launch URL and invite links start with it.
        KERNELGRADER_PUBLIC_URL=f"http://127.0.0.1:{port}",
    )
    if mail is not None:
        env.update(
            KERNELGRADER_SMTP_HOST=mail.host,
            KERNELGRADER_SMTP_PORT=str(mail.port),
            KERNELGRADER_SMTP_SECURITY="none",
            KERNELGRADER_SMTP_FROM="kernelgrader <grader@example.edu>",
        )
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
        # The local worker registers before the seed below writes: a seed holding SQLite's
        # write lock past the busy timeout stopped a worker that was still announcing itself.
        while time.monotonic() < deadline and process.poll() is None:
            workers = httpx.get(f"{base}/api/v1/health", timeout=2).json()["workers"]
            if any(w["alive"] and w["compile"] for w in workers):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the local worker never registered:\n" + log.read_text())
        db_url = f"sqlite:///{folder / 'var' / 'kernelgrader.sqlite'}"
        server = Server(
            base=base,
            people=None,  # type: ignore[arg-type]
            ids={},
            db_url=db_url,
            log=log,
            mail=mail,
        )
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

    def __init__(
        self,
        browser: Any,
        server: Server,
        *,
        width: int = 1280,
        height: int = 900,
        javascript: bool = True,
    ):
        self.server = server
        self.context = browser.new_context(
            viewport={"width": width, "height": height},
            accept_downloads=True,
            java_script_enabled=javascript,
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

    def axe(self) -> list[dict[str, Any]]:
        """The page's serious and critical accessibility violations, by axe-core."""
        self.page.add_script_tag(path=str(axe_path()))
        found = self.page.evaluate(
            """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
                .map(v => ({id: v.id, impact: v.impact, help: v.help,
                            nodes: v.nodes.slice(0, 4).map(n => n.target.join(" "))}))"""
        )
        return [v for v in found if v["impact"] in ("serious", "critical")]

    def focused(self) -> dict[str, str]:
        """What has the keyboard focus: its tag, text, name, and whether a ring shows it."""
        return dict(
            self.page.evaluate(
                """() => {
                    const e = document.activeElement; const s = getComputedStyle(e);
                    const ring = s.outlineStyle !== "none" && s.outlineWidth !== "0px";
                    return {tag: e.tagName.toLowerCase(),
                            text: (e.innerText || e.value || "").trim(),
                            label: e.getAttribute("aria-label") || "", name: e.name || "",
                            type: e.type || "", href: e.getAttribute("href") || "",
                            ring: ring ? "yes" : "no"} }"""
            )
        )

    def tab_to(self, matches: Any, *, limit: int = 120, backwards: bool = False) -> dict[str, str]:
        """Press Tab (or Shift+Tab) until the focused element satisfies `matches`."""
        seen = []
        for _ in range(limit):
            self.page.keyboard.press("Shift+Tab" if backwards else "Tab")
            now = self.focused()
            if matches(now):
                return now
            seen.append(now.get("text") or now.get("label") or now.get("name") or now["tag"])
        raise AssertionError(f"Tab never reached it; focus went through {seen}")

    def sideways_overflow(self) -> int:
        """How many CSS pixels the page is wider than the window (0: no sideways scroll)."""
        return int(
            self.page.evaluate(
                "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
                " - window.innerWidth"
            )
        )

    def overflowing(self) -> list[str]:
        """The innermost elements that reach past the window's right edge, for a failure."""
        return list(
            self.page.evaluate(
                """() => [...document.querySelectorAll("body *")]
                    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                                 && ![...e.children].some(c =>
                                        c.getBoundingClientRect().right > window.innerWidth + 1))
                    .filter(e => !e.closest(".scroll, pre"))
                    .slice(0, 5)
                    .map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
                              + (e.className ? "." + String(e.className).split(" ").join(".") : "")
                              + " " + Math.round(e.getBoundingClientRect().right))"""
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
