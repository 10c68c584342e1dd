"""kernelgrader: a CUDA kernel autograder service."""

__version__ = "0.1.0"
