"""`python -m app.cli`: how serve starts its local worker with the same interpreter."""

from app.cli import main

main()
