"""Settings: defaults under the data folder, and no development secrets outside development."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.settings import DEV_SECRET_KEY, Settings


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
