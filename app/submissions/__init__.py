"""Intake of student source files and their status history."""
