"""The sandbox every step that reads student input runs in: a fresh child process with rlimits,
a private folder, a scrubbed environment and no network. `runner.run_sandboxed` is the entry.
"""
