"""Late-day budgets: days a student may spend past due dates across a course (issue 20)."""
