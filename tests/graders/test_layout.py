"""The engine's shape: a folder per stage, no import loops, nothing beyond NumPy and CuPy."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

GRADERS = Path(__file__).resolve().parents[2] / "graders"
ALLOWED_THIRD_PARTY = {"numpy", "cupy", "cupy_backends", "cupyx", "pynvml"}
STAGES = {"spec", "compile", "sandbox", "run", "timing", "sanitizer", "profile", "scoring"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(GRADERS.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Every graders module and the graders modules it imports, at any depth in its body."""
    modules = {_module_name(p): p for p in GRADERS.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            deps.update(t for t in targets if t in modules and t != name)
        graph[name] = deps
    return graph


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in STAGES else module


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 finished

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_every_stage_has_its_folder() -> None:
    folders = {p.name for p in GRADERS.iterdir() if (p / "__init__.py").is_file()}
    assert folders >= STAGES


def test_no_module_imports_itself_round_a_loop() -> None:
    assert _find_cycle(_imports()) is None


def test_no_stage_imports_another_round_a_loop() -> None:
    stages: dict[str, set[str]] = {}
    for module, deps in _imports().items():
        stages.setdefault(_stage(module), set()).update(
            _stage(d) for d in deps if _stage(d) != _stage(module)
        )
    assert _find_cycle(stages) is None


@pytest.mark.parametrize("path", sorted(GRADERS.rglob("*.py")), ids=lambda p: p.name)
def test_the_engine_imports_only_the_standard_library_numpy_and_cupy(path: Path) -> None:
    outside = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in ("graders", "reference_kernels", "__future__"):
                continue
            if top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY:
                outside.add(name)
    assert not outside, f"{path.relative_to(GRADERS.parent)} imports {sorted(outside)}"


def test_the_report_reader_is_loaded_only_lazily_by_the_profile_stage() -> None:
    """NVIDIA's ncu_report (a binary wheel, present only where profiling is installed) is
    loaded by name through importlib inside a function of graders.profile.extract, so the
    engine still imports with NumPy and CuPy alone."""
    loaders = []
    for path in sorted(GRADERS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_functions = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and "import_module('ncu_report')" in ast.unparse(node):
                loaders.append(path.relative_to(GRADERS.parent).as_posix())
                assert id(node) in in_functions, f"{path.name} loads ncu_report at import time"
    assert sorted(set(loaders)) == ["graders/profile/extract.py"], loaders
