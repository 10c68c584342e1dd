"""grading jobs: the queue of the last send, and the stamp and queue of the message claimed

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 21:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sent_queue', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('taken_sent_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('taken_queue', sa.String(length=40), nullable=True))
        batch_op.create_index('ix_grading_jobs_taken', ['taken_queue', 'taken_sent_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_grading_jobs_taken')
        batch_op.drop_column('taken_queue')
        batch_op.drop_column('taken_sent_at')
        batch_op.drop_column('sent_queue')
