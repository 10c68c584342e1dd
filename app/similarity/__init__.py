"""Similarity reports: MOSS-style fingerprinting of a lab's counted submissions (issue 20)."""
