"""a password set through a link shown to a course's staff (issue 31, class 1)

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 05:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Passwords set before this are taken as their owners': which link set them is not known.
    op.add_column(
        'users',
        sa.Column('password_via_shown_link', sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('password_via_shown_link')
