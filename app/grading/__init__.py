"""Grading: the worker's side of a job (claim, compile, run, record), what follows a verdict
(flows.after_grading), the sweep that resends what the broker lost, and a lab's regrade."""
