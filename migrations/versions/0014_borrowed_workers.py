"""borrowed workers: the fleet's Slurm jobs, its loop's lease, a worker's idle and drain
marks (issue 37)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 03:30:26.214445
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "borrowed_workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=20), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("gpu_model", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("scheduler_state", sa.String(length=40), nullable=False),
        sa.Column("scheduler_reason", sa.String(length=200), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("worker_name", sa.String(length=255), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("can_run", sa.Boolean(), nullable=True),
        sa.Column("worker_note", sa.Text(), nullable=False),
        sa.Column("drain_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_borrowed_workers")),
        sa.UniqueConstraint("backend", "job_id", name=op.f("uq_borrowed_workers_backend_job_id")),
    )
    with op.batch_alter_table("borrowed_workers", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_borrowed_workers_ended_at"), ["ended_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_borrowed_workers_state"), ["state"], unique=False)

    op.create_table(
        "fleet_runners",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=20), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ticked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fleet_runners")),
        sa.UniqueConstraint("backend", name=op.f("uq_fleet_runners_backend")),
    )
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("fleet_job", sa.String(length=100), server_default="", nullable=False)
        )
        batch_op.add_column(sa.Column("busy_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("drain_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("drain_at")
        batch_op.drop_column("busy_at")
        batch_op.drop_column("fleet_job")

    op.drop_table("fleet_runners")
    with op.batch_alter_table("borrowed_workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_borrowed_workers_state"))
        batch_op.drop_index(batch_op.f("ix_borrowed_workers_ended_at"))

    op.drop_table("borrowed_workers")
