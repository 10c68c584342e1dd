"""A small deadline rush, as CI can afford: bench/rush.py against real processes, audited.

Embedded default: uploads and reads at 128 in flight while a worker is killed twice.
Larger setup: the CI PostgreSQL (a fresh database) with a redis-server of the test's own on
another loopback port, restarted without persistence mid-burst (down a second), so queued
messages are really lost and the sweeper must find them, and uploads meanwhile leave their
sends to it. (Restarting the CI Redis instead would drop other tests' queues, and
scripts/ci-services.sh now runs it with persistence, which would lose nothing.)

Asserted: nothing lost, nothing stuck, nothing doubled, no 5xx but 503 (each with a sentence
and Retry-After), /health answering throughout. No timing is asserted; bench/rush.py prints it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.app.scaled import POSTGRES_VAR, fresh_database, required_url

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def rush(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "rush.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELGRADER_")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "rush.py"), *args, "--json", str(out)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.exists(), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    result["printed"] = done.stdout + done.stderr
    return result


def assert_clean(result: dict[str, Any]) -> None:
    audit, printed = result["audit"], result["printed"]
    assert audit["acknowledged"] > 0, printed
    assert audit["lost"] == [], printed
    # An upload is stored exactly when it was answered 202.
    assert audit["stored_not_acknowledged"] == 0, printed
    assert audit["not_final"] == [], printed
    assert audit["more_than_one_result"] == [], printed
    assert result["5xx_other_than_503"] == 0, printed
    assert result["no_answer"] == 0, printed
    assert result["refusals_without_sentence"] == 0, printed
    assert result["health"]["asked"] > 0 and result["health"]["bad"] == 0, printed


def test_a_rush_on_the_embedded_default_with_workers_killed(tmp_path: Path) -> None:
    result = rush(
        tmp_path,
        "--students", "60",
        "--uploads", "150",
        "--rate", "300",
        "--concurrency", "128",
        "--reads", "150",
        "--read-concurrency", "128",
        "--workers", "2",
        "--kill-every", "2",
        "--kill-after-load", "5",
        "--settle-timeout", "180",
        # A killed worker's job comes back after the heartbeat timeout; short, to keep CI short.
        "--env", "HEARTBEAT_SECONDS=1",
        "--env", "HEARTBEAT_TIMEOUT_SECONDS=6",
    )  # fmt: skip
    assert_clean(result)
    assert [what for _, what in result["events"]].count("kill worker") >= 2, result["printed"]
    # Reads past the bound on requests in flight are refused (503), never failed.
    assert set(result["reads"]["statuses"]) <= {"200", "503"}, result["printed"]
    assert result["reads"]["ok"] > 0, result["printed"]


def test_a_redis_restart_without_persistence_strands_nothing(tmp_path: Path) -> None:
    server = required_url(POSTGRES_VAR)
    with fresh_database(server) as url:
        result = rush(
            tmp_path,
            "--setup", "scaled",
            "--postgres-url", url,
            "--students", "40",
            "--uploads", "80",
            "--rate", "40",
            "--concurrency", "64",
            "--reads", "0",
            "--workers", "2",
            "--kill-every", "0",
            # Once messages wait on Redis, whatever the machine's pace, and down a second: the
            # uploads meanwhile are answered, and their sends left to the sweepers.
            "--broker-restart-at", "0.5",
            "--broker-restart-queued", "8",
            "--broker-down", "1",
            "--settle-timeout", "180",
            "--env", "RESEND_UNSTARTED_AFTER_SECONDS=5",
        )  # fmt: skip
    assert_clean(result)
    assert "restart broker: done" in [what for _, what in result["events"]], result["printed"]
    # The restart lost queued messages, and the sweepers sent those jobs again.
    assert result["sent_again_as_lost"] > 0, result["printed"]
    assert result["final_after_broker_restart_seconds"] is not None, result["printed"]
