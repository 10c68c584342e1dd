"""similarity reports list the submissions that are (nearly) a reference kernel (issue 36, item 8)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29 10:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0018'
down_revision: str | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Reports made before this list none: asking for a new one finds them.
    op.create_table('similarity_reference_copies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('report_id', sa.Integer(), nullable=False),
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=400), nullable=False),
    sa.Column('reference', sa.String(length=200), nullable=False),
    sa.Column('share', sa.Double(), nullable=False),
    sa.Column('overlap_tokens', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['report_id'], ['similarity_reports.id'], name=op.f('fk_similarity_reference_copies_report_id_similarity_reports'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_similarity_reference_copies_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_similarity_reference_copies'))
    )
    with op.batch_alter_table('similarity_reference_copies', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_similarity_reference_copies_report_id'), ['report_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('similarity_reference_copies', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_similarity_reference_copies_report_id'))
    op.drop_table('similarity_reference_copies')
