"""Courses, their labs and who is enrolled with which role."""
