"""Stage 3, timing: CUDA events, L2 flushes, repetitions until the median is trustworthy."""
