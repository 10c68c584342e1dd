"""Alembic's migrations. A package only so that the wheel carries it, as `app.migrations`
(setup.py maps that name to this folder); Alembic itself reads the files by path."""
