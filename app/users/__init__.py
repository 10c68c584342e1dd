"""People and their API tokens."""
