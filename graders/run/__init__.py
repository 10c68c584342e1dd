"""Stage 2, run: inputs, launches, the trusted answer and the comparison, in a sandboxed child on
the GPU (`cases.run_cases`); `harness` owns device buffers, `compare` and `oracles` the checks.
"""
