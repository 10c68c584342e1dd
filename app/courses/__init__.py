"""Courses, their labs (read from their folders), who is enrolled with which role, and dates:
due dates, extensions, release."""
