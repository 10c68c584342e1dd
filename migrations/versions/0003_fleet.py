"""fleet: the worker registry, GPU-model routing of jobs and labs, stage seconds per job

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 20:37:43.002672
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.String(length=100), nullable=False),
        sa.Column("gpu_model", sa.String(length=200), nullable=False),
        sa.Column("arch", sa.String(length=20), nullable=False),
        sa.Column("can_compile", sa.Boolean(), nullable=False),
        sa.Column("can_run", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("queues", sa.JSON(), nullable=False),
        sa.Column("version", sa.String(length=40), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("timing_temperature_c", sa.Integer(), nullable=True),
        sa.Column("timing_sm_clock_mhz", sa.Integer(), nullable=True),
        sa.Column("timed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("name", name=op.f("uq_workers_name")),
    )
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workers_heartbeat_at"), ["heartbeat_at"], unique=False)

    # Rows that exist already need no GPU model ("" : any) and have no stage seconds.
    with op.batch_alter_table("grading_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("gpu_model", sa.String(length=200), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("wait_seconds", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("compile_seconds", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("run_seconds", sa.Double(), nullable=True))

    with op.batch_alter_table("labs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("gpu_model", sa.String(length=200), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("labs", schema=None) as batch_op:
        batch_op.drop_column("gpu_model")

    with op.batch_alter_table("grading_jobs", schema=None) as batch_op:
        batch_op.drop_column("run_seconds")
        batch_op.drop_column("compile_seconds")
        batch_op.drop_column("wait_seconds")
        batch_op.drop_column("gpu_model")

    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workers_heartbeat_at"))

    op.drop_table("workers")
