"""The gradebook: one counted score per student and lab, exported as CSV."""
