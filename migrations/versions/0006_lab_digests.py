"""the lab digest a course last checked, and the one each grading job was graded against

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing rows get "": not recorded (a regrade says which submissions predate the record).
    with op.batch_alter_table('labs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('digest', sa.String(length=64), nullable=False, server_default=''))

    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lab_digest', sa.String(length=64), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('grading_jobs', schema=None) as batch_op:
        batch_op.drop_column('lab_digest')

    with op.batch_alter_table('labs', schema=None) as batch_op:
        batch_op.drop_column('digest')
