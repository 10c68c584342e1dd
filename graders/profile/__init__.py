"""The profiling stage: Nsight Compute on the timed case, findings in sentences on lines."""
