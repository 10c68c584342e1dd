"""compiled programs kept for the GPU worker that runs a waiting job (issue 35)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0016'
down_revision: str | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'kept_programs',
        sa.Column('job_id', sa.Integer(), nullable=False),
        sa.Column('recipe', sa.String(length=300), nullable=False),
        sa.Column('result', sa.JSON(), nullable=False),
        sa.Column('cubin', sa.LargeBinary(), nullable=False),
        sa.Column('kept_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['job_id'], ['grading_jobs.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('job_id'),
    )


def downgrade() -> None:
    op.drop_table('kept_programs')
