"""The grading engine: lab specs, NVRTC compile, the sandboxed run stage, timing and scoring.

A library with no web or database in it; it imports only the standard library, NumPy and
CuPy, so it runs on a bare GPU host. Import the stage you need (`graders.spec`,
`graders.compile`, `graders.grade`); nothing is imported here, so `import graders` stays cheap.
"""
