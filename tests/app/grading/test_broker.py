"""The embedded (SQLite) broker keeps no delivered message."""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from app.jobs.celery_app import GRADE_TASK, QUEUE, make_celery
from tests.app.scaled import settings_from


def _rows(path: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT id, visible FROM kombu_message ORDER BY id").fetchall()


def test_acknowledged_and_put_back_messages_leave_no_row(tmp_path: Path) -> None:
    broker = tmp_path / "broker.sqlite"
    with settings_from(broker_url=f"sqla+sqlite:///{broker}"):
        celery = make_celery()
        with celery.connection_for_write() as connection:
            channel = connection.default_channel
            channel.queue_declare(queue=QUEUE, durable=True, auto_delete=False)
            for n in range(3):
                celery.send_task(GRADE_TASK, args=[n, n], queue=QUEUE)
            assert len(_rows(broker)) == 3
            taken = channel.basic_get(QUEUE)
            assert [visible for _, visible in _rows(broker)] == [0, 1, 1]
            taken.ack()  # a job done: its message goes
            assert len(_rows(broker)) == 2
            again = channel.basic_get(QUEUE)
            again.reject(requeue=True)  # put back: a new row, the taken one goes
            assert [visible for _, visible in _rows(broker)] == [1, 1]
            left = channel.queue_declare(queue=QUEUE, durable=True, auto_delete=False)
            assert left.message_count == 2
        celery.close()


def test_a_message_a_dead_worker_took_is_deleted_once_old(tmp_path: Path) -> None:
    broker = tmp_path / "broker.sqlite"
    with settings_from(
        broker_url=f"sqla+sqlite:///{broker}", broker_forget_taken_after_seconds="60"
    ):
        celery = make_celery()
        celery.send_task(GRADE_TASK, args=[1, 1], queue=QUEUE)
        celery.send_task(GRADE_TASK, args=[2, 2], queue=QUEUE)
        # One was taken two minutes ago by a worker that was killed before acknowledging it.
        with sqlite3.connect(broker) as db:
            (first,) = db.execute("SELECT min(id) FROM kombu_message").fetchone()
            old = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 120))
            db.execute(
                "UPDATE kombu_message SET visible = 0, timestamp = ? WHERE id = ?", (old, first)
            )
        with celery.connection_for_read() as connection:
            message = connection.default_channel.basic_get(QUEUE)
            assert message is not None and message.payload is not None
        # The poll cleared the dead worker's row; the message it took was put back when this
        # connection closed without acknowledging it.
        rows = _rows(broker)
        assert first not in [row_id for row_id, _ in rows]
        assert [visible for _, visible in rows] == [1]
        celery.close()


def test_a_threaded_worker_acknowledges_from_job_threads_while_the_consumer_polls(
    tmp_path: Path,
) -> None:
    # `worker --pool=threads` acknowledges a message from the thread that ran its job while
    # the consumer's thread goes on polling the same channel: each deletes rows, so neither
    # may use the other's database session.
    broker = tmp_path / "broker.sqlite"
    count = 60
    with settings_from(broker_url=f"sqla+sqlite:///{broker}"):
        celery = make_celery()
        for n in range(count):
            celery.send_task(GRADE_TASK, args=[n, n], queue=QUEUE)
        taken: queue.Queue[Any] = queue.Queue()
        failures: list[BaseException] = []
        with celery.connection_for_read() as connection:
            channel = connection.default_channel

            def consume() -> None:
                try:
                    got = 0
                    for _ in range(count * 20):  # bounded: polls past the last message too
                        message = channel.basic_get(QUEUE)
                        if message is not None:
                            got += 1
                            taken.put(message)
                        elif got == count:
                            break
                except BaseException as exc:
                    failures.append(exc)
                finally:
                    taken.put(None)

            def acknowledge() -> None:
                try:
                    while (message := taken.get(timeout=30)) is not None:
                        message.ack()
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=consume), threading.Thread(target=acknowledge)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        celery.close()
    assert failures == []
    assert _rows(broker) == []


def test_a_queue_another_process_adds_at_the_same_moment_is_the_queue(
    tmp_path: Path, monkeypatch: Any
) -> None:
    broker = tmp_path / "broker.sqlite"
    with settings_from(broker_url=f"sqla+sqlite:///{broker}"):
        celery = make_celery()
        with celery.connection_for_write() as connection:
            channel = connection.default_channel
            channel.queue_declare(queue=QUEUE, durable=True, auto_delete=False)  # the tables
            session = channel.session
            add = session.add

            def another_process_first(obj: Any) -> None:
                # Between this channel's look-up (no such queue) and its insert, another
                # process (a separate connection here) inserts the same queue.
                with sqlite3.connect(broker) as db:
                    db.execute("INSERT INTO kombu_queue (name) VALUES (?)", (obj.name,))
                add(obj)

            monkeypatch.setattr(session, "add", another_process_first)
            channel.queue_declare(queue="raced", durable=True, auto_delete=False)
            monkeypatch.undo()
            celery.send_task(GRADE_TASK, args=[1, 1], queue="raced")
            assert channel.basic_get("raced") is not None  # the queue works
            with sqlite3.connect(broker) as db:
                names = [n for (n,) in db.execute("SELECT name FROM kombu_queue")]
            assert names.count("raced") == 1
        celery.close()
