"""Check a lab's `oracle.py` without running it: it parses and defines what the grader calls.

The grader calls `expected(inputs, sizes, scalars)` and, where defined, `check(outputs,
expected, inputs, sizes)`, each with positional arguments (graders.run.python_oracle). Running
the file is the run stage's business (and `lab check`'s); loading a spec never executes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from graders.spec.fields import FieldReader
from graders.spec.model import PythonOracleSpec

DEFAULT_ORACLE_FILE = "oracle.py"
# name -> the positional arguments the grader passes, in order.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "expected": ("inputs", "sizes", "scalars"),
    "check": ("outputs", "expected", "inputs", "sizes"),
}
MAX_ORACLE_BYTES = 1 * 2**20


def _takes(node: ast.FunctionDef, count: int) -> bool:
    """Whether the function can be called with exactly `count` positional arguments."""
    args = node.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    kw_required = any(d is None for d in args.kw_defaults)
    fits = required <= count and (count <= positional or args.vararg is not None)
    return fits and not kw_required


def read_oracle_file(ctx: FieldReader, folder: Path, name: str, path: str) -> PythonOracleSpec:
    if not name.endswith(".py"):
        ctx.fail(path, f"{name!r} is not a .py file")
    target = (folder / name).resolve()
    if not target.is_relative_to(folder):
        ctx.fail(path, f"{name!r} is outside the lab folder")
    if not target.is_file():
        ctx.fail(
            path,
            f'the file {name!r} does not exist in {folder.name}/ (oracle = "python" reads the '
            "lab's expected answer from it)",
        )
    if target.stat().st_size > MAX_ORACLE_BYTES:
        ctx.fail(path, f"{name!r} is larger than 1 MiB")
    try:
        source = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        ctx.fail(path, f"{name!r} is not UTF-8 text")
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        ctx.fail(path, f"{name!r} line {exc.lineno}: {exc.msg}")
    defined: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and node.name in FUNCTIONS:
            ctx.fail(path, f"{name!r} line {node.lineno}: {node.name}() must not be async")
        if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
            defined[node.name] = node
    if "expected" not in defined:
        ctx.fail(
            path,
            f"{name!r} defines no top-level function expected(inputs, sizes, scalars), "
            "which returns the expected outputs",
        )
    for fname, node in defined.items():
        wanted = FUNCTIONS[fname]
        if not _takes(node, len(wanted)):
            ctx.fail(
                path,
                f"{name!r} line {node.lineno}: {fname}() must take {len(wanted)} positional "
                f"arguments ({', '.join(wanted)})",
            )
    return PythonOracleSpec(file=name, source=source, has_check="check" in defined)
