"""The gradebook: one counted score per student and lab (app.policy counts it), on the course
page, the staff's gradebook and roster, and exported as CSV."""
