"""account hygiene (issue 31): sessions ended per account, invite links' kind and shown course

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 03:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sessions_ended_at', sa.DateTime(timezone=True), nullable=True))

    with op.batch_alter_table('invites', schema=None) as batch_op:
        # Links made before this were all made by staff or the operator.
        batch_op.add_column(sa.Column('kind', sa.String(length=10), nullable=False, server_default='invite'))
        batch_op.add_column(sa.Column('shown_in_course_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_invites_shown_in_course_id_courses'), 'courses', ['shown_in_course_id'], ['id'], ondelete='CASCADE')


def downgrade() -> None:
    with op.batch_alter_table('invites', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_invites_shown_in_course_id_courses'), type_='foreignkey')
        batch_op.drop_column('shown_in_course_id')
        batch_op.drop_column('kind')

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('sessions_ended_at')
