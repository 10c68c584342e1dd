"""staff-only notes beside submission statuses, and the instructor's order of a course's labs

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('status_staff_note', sa.Text(), nullable=False, server_default=''))

    with op.batch_alter_table('submission_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('staff_note', sa.Text(), nullable=False, server_default=''))

    with op.batch_alter_table('labs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('position', sa.Integer(), nullable=False, server_default='0'))

    # Existing courses keep the order their pages showed: due date (none last), then id.
    labs = sa.table(
        'labs',
        sa.column('id', sa.Integer()),
        sa.column('course_id', sa.Integer()),
        sa.column('due_at', sa.DateTime(timezone=True)),
        sa.column('position', sa.Integer()),
    )
    bind = op.get_bind()
    rows = bind.execute(sa.select(labs.c.id, labs.c.course_id, labs.c.due_at)).all()
    by_course: dict[int, list[tuple[int, object]]] = {}
    for lab_id, course_id, due_at in rows:
        by_course.setdefault(course_id, []).append((lab_id, due_at))
    for course_labs in by_course.values():
        dated = sorted((r for r in course_labs if r[1] is not None), key=lambda r: (str(r[1]), r[0]))
        undated = sorted((r for r in course_labs if r[1] is None), key=lambda r: r[0])
        for position, (lab_id, _) in enumerate([*dated, *undated], start=1):
            bind.execute(sa.update(labs).where(labs.c.id == lab_id).values(position=position))


def downgrade() -> None:
    with op.batch_alter_table('labs', schema=None) as batch_op:
        batch_op.drop_column('position')

    with op.batch_alter_table('submission_events', schema=None) as batch_op:
        batch_op.drop_column('staff_note')

    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('status_staff_note')
