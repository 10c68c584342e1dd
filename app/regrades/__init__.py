"""Regrade requests: a student asks, the staff answer (issue 20)."""
