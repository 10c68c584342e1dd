"""Rubric points: staff-graded items on top of the autograde (issue 20)."""
