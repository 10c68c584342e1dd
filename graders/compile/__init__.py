"""Stage 1, compile: the include policy, NVRTC in a sandboxed child, the cubin's tables, the
lab's declarations and rules, and static warnings. `compiler.compile_submission` is the entry.
"""
