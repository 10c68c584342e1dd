"""Kernel speed: timed results, the GPU peaks they are measured against, and class distributions."""
