"""Alembic environment: the URL comes from kernelgrader's settings, the schema from app.models."""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any, Literal

from alembic import context

from app.core.database import UTCDateTime, get_engine
from app.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # Migrations must not import app code, so our column types render as plain SQLAlchemy.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def run_migrations() -> None:
    with get_engine().connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode rebuilds a table by dropping it, and with foreign keys on SQLite
            # first deletes every row that refers to it (ON DELETE CASCADE): rebuilding
            # `lti_platforms` emptied `lti_contexts`. Off while migrating (the pragma takes
            # only outside a transaction, so first), and the keys checked before committing.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
                render_as_batch=sqlite,
                compare_type=True,
                render_item=_render_item,
            )
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the migration left rows that refer to none: {broken}")
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    raise SystemExit("Offline migrations are not supported; run `kernelgrader db upgrade`.")
run_migrations()
