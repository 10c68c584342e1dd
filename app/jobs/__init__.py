"""Background jobs: the Celery app and its queues, the broker, and what every kind of job
(gradings, profiles, similarity reports) shares."""
