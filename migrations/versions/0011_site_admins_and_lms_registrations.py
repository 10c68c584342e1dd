"""site administrators; LMS registrations owned by the installation, each with its own key

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29 03:26:45.899400

Existing registrations keep working: each gets a slug (`lms-<id>`) and keeps signing with the
one key served at /lti/jwks (`shared_key`) until a site administrator rotates it. An issuer
now belongs to one registration: where two shared one, the first keeps it and the later ones
are renamed `disabled-duplicate-<id>:<issuer>` (their launches are refused until a site
administrator removes or corrects them). LMS identities are tied to the registration that
owns their issuer. Contexts keep the courses they are linked to; a registration no longer
links new ones by itself.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

platforms = sa.table(
    'lti_platforms',
    sa.column('id', sa.Integer),
    sa.column('slug', sa.String),
    sa.column('issuer', sa.String),
    sa.column('shared_key', sa.Boolean),
)
identities = sa.table(
    'user_identities',
    sa.column('kind', sa.String),
    sa.column('issuer', sa.String),
    sa.column('platform_id', sa.Integer),
)


def upgrade() -> None:
    # Added columns first (an ALTER each, no rebuild: a string default keeps it so), data
    # filled in, then one rebuild per table for its constraints.
    op.add_column('lti_platforms', sa.Column('slug', sa.String(length=64), nullable=True))
    op.add_column('lti_platforms', sa.Column('shared_key', sa.Boolean(), server_default='0', nullable=False))
    op.add_column('lti_tool_keys', sa.Column('platform_id', sa.Integer(), nullable=True))
    op.add_column('sign_in_problems', sa.Column('platform_id', sa.Integer(), nullable=True))
    op.add_column('sign_in_problems', sa.Column('course_id', sa.Integer(), nullable=True))
    op.add_column('user_identities', sa.Column('platform_id', sa.Integer(), nullable=True))
    op.add_column('users', sa.Column('is_site_admin', sa.Boolean(), server_default='0', nullable=False))

    connection = op.get_bind()
    seen: set[str] = set()
    for row in connection.execute(sa.select(platforms.c.id, platforms.c.issuer).order_by(platforms.c.id)):
        values: dict[str, object] = {'slug': f'lms-{row.id}', 'shared_key': True}
        if row.issuer in seen:
            values['issuer'] = f'disabled-duplicate-{row.id}:{row.issuer}'[:500]
        seen.add(row.issuer)
        connection.execute(sa.update(platforms).where(platforms.c.id == row.id).values(**values))
    owner = (
        sa.select(sa.func.min(platforms.c.id))
        .where(platforms.c.issuer == identities.c.issuer)
        .scalar_subquery()
    )
    connection.execute(
        sa.update(identities).where(identities.c.kind == 'lti').values(platform_id=owner)
    )

    with op.batch_alter_table('lti_platforms', schema=None) as batch_op:
        batch_op.alter_column('slug', existing_type=sa.String(length=64), nullable=False)
        batch_op.drop_constraint(batch_op.f('uq_lti_platforms_issuer_client_id'), type_='unique')
        batch_op.create_unique_constraint(batch_op.f('uq_lti_platforms_issuer'), ['issuer'])
        batch_op.create_unique_constraint(batch_op.f('uq_lti_platforms_slug'), ['slug'])
        batch_op.drop_constraint(batch_op.f('fk_lti_platforms_course_id_courses'), type_='foreignkey')
        batch_op.drop_column('course_id')

    with op.batch_alter_table('lti_tool_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_tool_keys_platform_id'), ['platform_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_lti_tool_keys_platform_id_lti_platforms'), 'lti_platforms', ['platform_id'], ['id'], ondelete='CASCADE')

    with op.batch_alter_table('sign_in_problems', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sign_in_problems_course_id'), ['course_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sign_in_problems_platform_id'), ['platform_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_sign_in_problems_platform_id_lti_platforms'), 'lti_platforms', ['platform_id'], ['id'], ondelete='CASCADE')
        batch_op.create_foreign_key(batch_op.f('fk_sign_in_problems_course_id_courses'), 'courses', ['course_id'], ['id'], ondelete='CASCADE')

    with op.batch_alter_table('user_identities', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_user_identities_platform_id'), ['platform_id'], unique=False)
        batch_op.create_unique_constraint(batch_op.f('uq_user_identities_platform_id_subject'), ['platform_id', 'subject'])
        batch_op.create_foreign_key(batch_op.f('fk_user_identities_platform_id_lti_platforms'), 'lti_platforms', ['platform_id'], ['id'], ondelete='CASCADE')


def downgrade() -> None:
    op.drop_column('users', 'is_site_admin')

    with op.batch_alter_table('user_identities', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_user_identities_platform_id_lti_platforms'), type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('uq_user_identities_platform_id_subject'), type_='unique')
        batch_op.drop_index(batch_op.f('ix_user_identities_platform_id'))
        batch_op.drop_column('platform_id')

    with op.batch_alter_table('sign_in_problems', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_sign_in_problems_course_id_courses'), type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('fk_sign_in_problems_platform_id_lti_platforms'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_sign_in_problems_platform_id'))
        batch_op.drop_index(batch_op.f('ix_sign_in_problems_course_id'))
        batch_op.drop_column('course_id')
        batch_op.drop_column('platform_id')

    # Keys made per registration go: the registrations sign with the shared key again.
    op.execute(sa.text('DELETE FROM lti_tool_keys WHERE platform_id IS NOT NULL'))
    with op.batch_alter_table('lti_tool_keys', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_lti_tool_keys_platform_id_lti_platforms'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_lti_tool_keys_platform_id'))
        batch_op.drop_column('platform_id')

    with op.batch_alter_table('lti_platforms', schema=None) as batch_op:
        batch_op.add_column(sa.Column('course_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_lti_platforms_course_id_courses'), 'courses', ['course_id'], ['id'], ondelete='SET NULL')
        batch_op.drop_constraint(batch_op.f('uq_lti_platforms_slug'), type_='unique')
        batch_op.drop_constraint(batch_op.f('uq_lti_platforms_issuer'), type_='unique')
        batch_op.create_unique_constraint(batch_op.f('uq_lti_platforms_issuer_client_id'), ['issuer', 'client_id'])
        batch_op.drop_column('shared_key')
        batch_op.drop_column('slug')
