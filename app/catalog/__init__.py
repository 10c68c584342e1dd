"""The course catalog: courses made in the web, archived and restored, copied to a new term."""
