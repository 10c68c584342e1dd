"""The embedded broker: kombu's SQLAlchemy transport, with delivered messages deleted.

kombu's transport marks a message it hands out `visible = false` and never deletes it:
acknowledging is kept in the consumer's memory only. Every delivered message stays in the
table, and each poll (the oldest visible message, over an index on `visible`) slows down as
they pile up: 32 ms a poll at 100,000. This channel remembers which row it handed out under
which delivery tag and deletes the row when the message is acknowledged, rejected or put back
(kombu puts a message back as a new row). A worker killed while it holds a message leaves
that row invisible; such rows are deleted once they are older than
KERNELGRADER_BROKER_FORGET_TAKEN_AFTER_SECONDS (the sweeper, which judges by the job's state
in the database, has sent the job again long before).

Each thread uses a session of its own: a worker's thread pool acknowledges a message (and so
deletes its row) from the thread that ran the job, while the consumer's thread polls.

Installed for `sqla+` broker URLs by `app.jobs.celery_app`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timedelta
from queue import Empty
from typing import Any

from kombu.transport import sqlalchemy as kombu_sqlalchemy
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError

log = logging.getLogger(__name__)

# How often a channel looks for rows of messages taken by workers that died.
FORGET_CHECK_SECONDS = 300.0


class Channel(kombu_sqlalchemy.Channel):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._local = threading.local()
        super().__init__(*args, **kwargs)
        # Both written from the consumer's thread (a message handed out) and from the threads
        # that acknowledge (a worker's `--pool=threads` acknowledges from the job's thread).
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}  # delivery tag -> row id of a message handed out
        self._to_delete: set[int] = set()  # rows whose delete failed (locked); tried again
        # -inf, not 0: the monotonic clock counts from boot, and on a machine up for less than
        # FORGET_CHECK_SECONDS a 0 here would skip the first check.
        self._forget_checked = float("-inf")

    @property
    def session(self) -> Any:
        # A session per thread: kombu's one session per channel would be used at once by the
        # consumer (polling) and by a job's thread (acknowledging, which deletes the row), and
        # a SQLAlchemy session must never be shared between threads.
        session = getattr(self._local, "session", None)
        if session is None:
            _, maker = self._open()
            session = self._local.session = maker()
        return session

    def _engine_from_config(self) -> Any:
        # kombu passes every transport option to create_engine(), which refuses the poll
        # interval that the virtual transport reads from the same options.
        options = self.connection.client.transport_options
        saved = options.pop("polling_interval", None)
        forget = options.pop("forget_taken_after_seconds", None)
        try:
            return super()._engine_from_config()
        finally:
            if saved is not None:
                options["polling_interval"] = saved
            if forget is not None:
                options["forget_taken_after_seconds"] = forget

    def _get_or_create(self, queue: str) -> Any:
        """kombu's, where another process adding the same queue at the same moment is no
        error: kombu guards the insert with a lock of one process only, and a web process
        sending the first upload while its worker started declared `grading` with it, so the
        worker died of the unique constraint and the upload waited for ever (seen in a test
        run of `serve`). The row the other process added is the queue."""
        try:
            return super()._get_or_create(queue)
        except IntegrityError:
            self.session.rollback()
            return self.session.query(self.queue_cls).filter(self.queue_cls.name == queue).one()

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        self._housekeeping()
        obj = self._get_or_create(queue)
        if self.session.bind.name == "sqlite":
            self.session.execute(text("BEGIN IMMEDIATE TRANSACTION"))
        try:
            msg = (
                self.session.query(self.message_cls)
                .with_for_update()
                .filter(self.message_cls.queue_id == obj.id)
                .filter(self.message_cls.visible.is_(True))
                .order_by(self.message_cls.sent_at)
                .order_by(self.message_cls.id)
                .limit(1)
                .first()
            )
            if msg is None:
                raise Empty()
            msg.visible = False
            payload: dict[str, Any] = json.loads(msg.payload)
            tag = payload.get("properties", {}).get("delivery_tag")
            if tag is not None:
                with self._lock:
                    self._rows[tag] = msg.id
            return payload
        finally:
            self.session.commit()

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple=multiple)
        self._delete_row_of(delivery_tag)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue=requeue)
        self._delete_row_of(delivery_tag)

    def _restore(self, message: Any) -> None:
        # Put back (a requeue, or unacknowledged messages at a warm shutdown): kombu writes it
        # as a new row, so the row it was taken from goes.
        super()._restore(message)
        self._delete_row_of(message.delivery_tag)

    def _delete_row_of(self, delivery_tag: str) -> None:
        with self._lock:
            row = self._rows.pop(delivery_tag, None)
            if row is not None:
                self._to_delete.add(row)
        self._delete_pending()

    def _delete_pending(self) -> None:
        with self._lock:
            rows = list(self._to_delete)
        if not rows:
            return
        try:
            self.session.query(self.message_cls).filter(self.message_cls.id.in_(rows)).delete(
                synchronize_session=False
            )
            self.session.commit()
        except OperationalError:
            # Locked for longer than the wait: the rows are deleted at the next chance.
            self.session.rollback()
            log.warning("could not delete %d delivered broker messages yet", len(rows))
            return
        with self._lock:
            self._to_delete.difference_update(rows)

    def _housekeeping(self) -> None:
        self._delete_pending()
        now = time.monotonic()
        if now - self._forget_checked < FORGET_CHECK_SECONDS:
            return
        self._forget_checked = now
        options = self.connection.client.transport_options
        after = float(options.get("forget_taken_after_seconds", 3600.0))
        # kombu stamps a row with the local time when it is taken (an onupdate on the column).
        before = datetime.now() - timedelta(seconds=after)
        try:
            gone = (
                self.session.query(self.message_cls)
                .filter(self.message_cls.visible.is_(False), self.message_cls.sent_at < before)
                .delete(synchronize_session=False)
            )
            self.session.commit()
        except OperationalError:
            self.session.rollback()
            return
        if gone:
            log.info("deleted %d broker messages taken by workers that stopped", gone)


class Transport(kombu_sqlalchemy.Transport):  # type: ignore[misc]
    Channel = Channel
