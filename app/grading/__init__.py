"""Grading jobs: the Celery task, the worker's stages, the sweeper and heartbeats."""
