"""Outgoing mail (reset and invite links) through the configured SMTP server, sent by a
background thread after the request's transaction commits, so a slow or unreachable server
never holds a request thread or a database connection, and a request's answer (to "forgot
password" above all) takes as long whether or not a mail goes out.

Only the standard library's smtplib: the server does the delivery; a failure is logged for
the staff (the person asks again, or asks the staff)."""

from __future__ import annotations

import logging
import queue
import smtplib
import ssl
import threading
from email.message import EmailMessage
from email.utils import make_msgid

from app.core.settings import Settings, get_settings

log = logging.getLogger(__name__)


def compose(*, to: str, subject: str, body: str, settings: Settings) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.smtp_from
    message["To"] = to
    message["Subject"] = subject
    domain = settings.smtp_from.rsplit("@", 1)[-1].strip("> ") or None
    message["Message-ID"] = make_msgid(domain=domain)
    message.set_content(body)
    return message


def deliver(message: EmailMessage, *, settings: Settings) -> None:
    """Hand one message to the SMTP server now (raises what smtplib raises)."""
    timeout = settings.smtp_timeout_seconds
    if settings.smtp_security == "ssl":
        context = ssl.create_default_context()
        server: smtplib.SMTP = smtplib.SMTP_SSL(
            settings.smtp_host, settings.smtp_port, timeout=timeout, context=context
        )
    else:
        server = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=timeout)
    with server:
        if settings.smtp_security == "starttls":
            server.starttls(context=ssl.create_default_context())
        if settings.smtp_username:
            server.login(settings.smtp_username, settings.smtp_password)
        server.send_message(message)


class Outbox:
    """Messages waiting for the sending thread, which starts with the first one."""

    def __init__(self) -> None:
        self._queue: queue.Queue[EmailMessage] = queue.Queue(maxsize=1000)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def send(self, *, to: str, subject: str, body: str) -> bool:
        """Queue a message; False when mail is off or the queue is full (logged)."""
        settings = get_settings()
        if not settings.mail_enabled:
            return False
        try:
            self._queue.put_nowait(compose(to=to, subject=subject, body=body, settings=settings))
        except queue.Full:
            log.error("mail to %s dropped: %d messages already wait", to, self._queue.qsize())
            return False
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="kernelgrader-mail", daemon=True
                )
                self._thread.start()
        return True

    def _run(self) -> None:
        while True:
            message = self._queue.get()
            try:
                deliver(message, settings=get_settings())
                log.info("mail to %s sent: %s", message["To"], message["Subject"])
            except (OSError, smtplib.SMTPException) as exc:
                log.error(
                    "mail to %s not sent (%s): check KERNELGRADER_SMTP_* settings",
                    message["To"],
                    exc,
                )
            finally:
                self._queue.task_done()

    def wait_until_sent(self) -> None:
        """For tests and shutdown: block until every queued message was handed over."""
        self._queue.join()


outbox = Outbox()
