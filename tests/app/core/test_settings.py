"""Settings: defaults under the data folder, and no development secrets outside development."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.settings import DEV_GRADING_SECRET, DEV_SECRET_KEY, SECRET_KEY_FILE, Settings


def test_defaults_put_the_database_and_broker_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(env="development", data_dir=tmp_path, database_url="", broker_url="")
    assert settings.database_url == f"sqlite:///{tmp_path.resolve() / 'kernelgrader.sqlite'}"
    assert settings.broker_url == f"sqla+sqlite:///{tmp_path.resolve() / 'broker.sqlite'}"
    assert settings.max_upload_bytes == 256 * 1024
    assert settings.default_arch == "sm_90"


@pytest.mark.parametrize("env", ["production", "test"])
def test_the_development_secret_is_refused_outside_development(env: str) -> None:
    with pytest.raises(ValidationError, match="KERNELGRADER_SECRET_KEY is still the development"):
        Settings(env=env, secret_key=DEV_SECRET_KEY, grading_secret="x" * 32)


def test_production_starts_with_real_secrets() -> None:
    settings = Settings(env="production", secret_key="s" * 40, grading_secret="g" * 40)
    assert settings.env == "production"


@pytest.mark.parametrize("weak", ["", "secret", "x" * 15])
def test_an_empty_or_short_secret_is_refused_outside_development(weak: str) -> None:
    # An empty signing key lets anyone sign a session cookie for any user.
    with pytest.raises(ValidationError, match="KERNELGRADER_SECRET_KEY is shorter than 16"):
        Settings(env="production", secret_key=weak, grading_secret="g" * 40)
    with pytest.raises(ValidationError, match="KERNELGRADER_GRADING_SECRET is shorter than 16"):
        Settings(env="production", secret_key="s" * 40, grading_secret=weak)


def test_a_pool_too_small_for_the_request_or_job_threads_is_refused(tmp_path: Path) -> None:
    base = {"env": "development", "data_dir": tmp_path, "db_pool_size": 5, "db_max_overflow": 5}
    with pytest.raises(ValidationError, match=r"at least KERNELGRADER_WEB_THREADS \+ 3 \(13\)"):
        Settings(**base, web_threads=10)
    # A threaded worker: each job and its heartbeat hold a connection at once.
    with pytest.raises(ValidationError, match=r"2 x KERNELGRADER_WORKER_CONCURRENCY \+ 2 \(14\)"):
        Settings(**base, web_threads=7, worker_concurrency=6)
    assert Settings(**base, web_threads=7, worker_concurrency=4).worker_concurrency == 4


def test_development_signs_with_a_key_of_its_own_never_the_public_default(
    tmp_path: Path,
) -> None:
    for given in ("", DEV_SECRET_KEY):
        settings = Settings(env="development", data_dir=tmp_path, secret_key=given)
        key = settings.session_secret()
        assert len(key) == 64 and key != DEV_SECRET_KEY
        assert (tmp_path / SECRET_KEY_FILE).read_text().strip() == key
    assert stat.S_IMODE((tmp_path / SECRET_KEY_FILE).stat().st_mode) == 0o600
    # Made once: the next process reads the same; a key that is set is used as given.
    assert Settings(env="development", data_dir=tmp_path, secret_key="").session_secret() == key
    base = {"env": "development", "data_dir": tmp_path, "grading_secret": DEV_GRADING_SECRET}
    chosen = Settings(**base, secret_key="k" * 20)
    assert chosen.session_secret() == "k" * 20
    assert chosen.weak_secrets() == ["KERNELGRADER_GRADING_SECRET"]
    assert Settings(**base, secret_key="short").weak_secrets() == [
        "KERNELGRADER_SECRET_KEY",
        "KERNELGRADER_GRADING_SECRET",
    ]
    assert Settings(**{**base, "grading_secret": "g" * 20}, secret_key="").weak_secrets() == []


def test_processes_starting_at_once_all_read_one_key(tmp_path: Path) -> None:
    path, go = tmp_path / "fresh" / SECRET_KEY_FILE, tmp_path / "go"
    # Each process waits for the same signal, so that all of them look for the key at once.
    script = (
        "import sys, time; from pathlib import Path; from app.core.settings import kept_secret\n"
        "while not Path(sys.argv[2]).exists(): time.sleep(0.0005)\n"
        "print(kept_secret(Path(sys.argv[1])))"
    )
    started = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    time.sleep(2)  # the interpreters start and import meanwhile
    go.touch()
    keys = {process.communicate(timeout=60)[0].strip() for process in started}
    assert len(keys) == 1 and len(next(iter(keys))) == 64
    assert sorted(p.name for p in path.parent.iterdir()) == [SECRET_KEY_FILE]


def test_a_key_another_process_made_meanwhile_wins_over_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between our look (no key yet) and our write, another process makes the key: ours is
    dropped and theirs read, never written over (the web process and its worker would sign
    with different keys)."""
    from app.core import settings as module

    path = tmp_path / SECRET_KEY_FILE
    theirs = "t" * 64
    real = module._read_secret
    looks = []

    def first_look_misses(where: Path) -> str:
        looks.append(where)
        if len(looks) == 1:
            where.write_text(theirs + "\n")  # made by the other process just after our look
            raise FileNotFoundError(where)
        return real(where)

    monkeypatch.setattr(module, "_read_secret", first_look_misses)
    assert module.kept_secret(path) == theirs
    assert path.read_text().strip() == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == [SECRET_KEY_FILE]


def test_a_file_without_a_usable_key_is_refused_in_a_sentence(tmp_path: Path) -> None:
    (tmp_path / SECRET_KEY_FILE).write_text("\n")
    with pytest.raises(ValueError, match="holds no usable key"):
        Settings(env="development", data_dir=tmp_path, secret_key="").session_secret()
