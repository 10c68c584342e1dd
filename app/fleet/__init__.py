"""The grading fleet: which workers run, what each can do, the queue, and metrics about both."""
