"""What the REST API's routes share: the errors they document, and the offline docs (each
feature owns its routes under /api/v1, in its api.py)."""
