"""Teams: students who submit one lab together (issue 20)."""
