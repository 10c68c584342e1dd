"""Nsight Compute profiles of submissions: the jobs, the kept reference profiles, the views."""
