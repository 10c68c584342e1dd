"""A real SMTP server (aiosmtpd) on loopback for the tests, and what it received."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest


@dataclass
class Inbox:
    host: str
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        with self._lock:
            self.messages.append(parsed)
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [m for m in self.messages if m["To"] == address]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def smtp_server() -> Iterator[Inbox]:
    from aiosmtpd.controller import Controller

    inbox = Inbox(host="127.0.0.1", port=free_port())
    controller = Controller(inbox, hostname=inbox.host, port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def mail_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    """The app's settings pointed at a fresh SMTP server on loopback, for one test."""
    from app.core.settings import get_settings

    with smtp_server() as inbox:
        settings = get_settings()
        monkeypatch.setattr(settings, "smtp_host", inbox.host)
        monkeypatch.setattr(settings, "smtp_port", inbox.port)
        monkeypatch.setattr(settings, "smtp_security", "none")
        monkeypatch.setattr(settings, "smtp_from", "kernelgrader <grader@example.edu>")
        yield inbox


def body_of(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())
