#!/usr/bin/env python3
"""The import direction of `app/`, checked: every import points down the floors written below.

Run by scripts/test.sh (so CI runs it): `python scripts/import_check.py` prints each import that
breaks a rule, with the rule, and exits 1 if there is one. In the style of Polar's own linters:
the standard library's `ast` over the source, nothing imported, nothing run.

The rules:

1. Every package of `app/` stands on a floor (FLOORS, bottom first). A package imports only its
   own modules and packages on lower floors: no import runs up or sideways. The first floors are
   the house's base, which every feature may use (`core`, `users`, `courses`, `jobs`); then the
   shared machinery (`web`, `api`), which imports the base alone, so no feature's internals;
   then the features, each above the features it builds on (the reason is written beside each);
   then the wiring at the top (`main`, `cli`, ...), which may import anything below.
2. No loops: no module imports, through any chain of imports, back into itself (imports inside
   functions and under TYPE_CHECKING included: a loop hidden in a function is still a loop).
3. No private names across packages: `from app.x.m import _name` only from within `app.x`.
4. An import inside a function is for a heavy optional dependency only: each needs an entry in
   LAZY (who may, what, and why); every other import goes at the top of its module.
5. No route sends: a feature's `api.py` and `pages.py` import none of SENDING. Services queue
   their jobs with the unit of work (app.jobs.sender.send_after_commit), which sends them once
   it commits.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Bottom first. A package may import the packages of the floors below its own.
FLOORS: list[tuple[str, str]] = [
    # The base, which every feature may use.
    ("core", "settings, the database and its unit of work, errors, security, mail, HTTP out"),
    ("users", "accounts, passwords, API tokens, invitations, site administrators"),
    ("courses", "courses, labs (their specs), roles and dates (due dates, extensions, release)"),
    (
        "jobs",
        "the Celery app, queues, the broker, the send-after-commit buffer, the lease of a "
        "background job, the worker registry and its heartbeats",
    ),
    # Shared machinery of the HTTP side, below every feature: it imports the base only.
    ("web", "templating, charts, the request's dependencies, the form and lab helpers"),
    ("api", "the API's error documentation and offline docs (above web: it uses its dependencies)"),
    # The features, each above what it builds on.
    ("people", "a course's people as its staff manage them: enrolment, roles, rosters, invites"),
    ("teams", "teams and their invitations; the credit rows a team's submission makes"),
    ("rubric", "rubric items and the staff's points"),
    (
        "catalog",
        "courses made in the web, archived and restored, and copied to a new term with their "
        "labs' settings and rubric items (so above rubric)",
    ),
    ("latedays", "the late-day ledger: charges, holds and events, budgets and balances"),
    (
        "submissions",
        "a submission and its gradings' record: intake (a team's credit, the "
        "late days an upload holds), the stored report, who may see what",
    ),
    (
        "policy",
        "what counts: the counted submission, lateness, late days spent, penalties and "
        "rubric points, recounted by one recount(lab, users); the rules that move it",
    ),
    ("performance", "timings and the leaderboard, read from the gradings' record"),
    ("regrades", "regrade requests (an accepted one recounts through policy)"),
    ("gradebook", "the gradebook and the staff's roster of a lab, from policy's counts"),
    ("similarity", "similarity reports over each student's counted submission (gradebook)"),
    ("fleet", "where workers come from: the plan, Slurm, metrics, /admin/fleet"),
    ("profiling", "Nsight Compute profiles: queued after a grading, run by GPU workers"),
    ("auth", "signing in: passwords, sessions, tokens, outside identities, refusals"),
    ("sso", "single sign-on (OpenID Connect, SAML) through auth"),
    ("lti", "LMS launches, rosters and scores (scores from policy's counts)"),
    ("grading", "the worker's side of a grading and the flow after it: profile, recount, LMS"),
    # The wiring, at the top.
    ("bootstrap", "the first run's course and accounts"),
    ("models", "every model, for Alembic's metadata"),
    ("main", "the FastAPI application: every feature's routes"),
    ("cli", "the `kernelgrader` command"),
]

# Who may import inside a function, and why (rule 4): (importing files, imported module or
# package, reason). Patterns are fnmatch's over paths relative to the repository.
LAZY: list[tuple[str, str, str]] = [
    (
        "app/cli/*.py",
        "*",
        "a command loads what it runs when it runs: `kernelgrader --help` starts in 0.6 s where "
        "loading the web app takes 2.5 s, and a GPU worker never loads the pages",
    ),
    (
        "app/main.py",
        "app.lti.*",
        "LTI needs the optional `sso` extra (pylti1p3); without it the app mounts pages that say "
        "how to install it",
    ),
    (
        "app/main.py",
        "app.sso.*",
        "single sign-on needs the optional `sso` extra (Authlib, pysaml2); without it the app "
        "mounts pages that say how to install it",
    ),
    (
        "app/lti/*.py",
        "pylti1p3*",
        "the `sso` extra: the LMS's calls load pylti1p3 where they run, so a worker without it "
        "still records the scores the LMS sync sends",
    ),
    (
        "app/lti/*.py",
        "app.lti.[gtr]*",
        "app.lti.tool (and grades and roster, which use it) import pylti1p3, the `sso` extra: "
        "loaded where an LMS call runs, not where a grading records its score",
    ),
    ("app/lti/*.py", "cryptography*", "the `sso` extra's, for the tool's keys only"),
    ("app/lti/*.py", "jwcrypto*", "the `sso` extra's, for the tool's keys only"),
    ("app/lti/*.py", "jwt", "the `sso` extra's, for reading a launch's token only"),
    ("app/lti/*.py", "requests", "the `sso` extra's, for pylti1p3's calls only"),
    (
        "app/sso/*.py",
        "saml2*",
        "pysaml2 (the `sso` extra) takes 2 s to load with its schemas; only a SAML sign-in "
        "needs it",
    ),
    (
        "app/sso/pages.py",
        "app.sso.[os]*",
        "OpenID Connect (Authlib) and SAML (pysaml2), the `sso` extra: loaded at the first "
        "sign-in of their kind",
    ),
    (
        "app/similarity/compute.py",
        "copydetect*",
        "copydetect takes 1.4 s to load; only a worker computing a report needs it",
    ),
    ("app/fleet/supervisor.py", "pynvml", "NVIDIA's management library, on GPU hosts only"),
    (
        "app/*",
        "graders.[cglpr]*",
        "the engine's stages (compiling, running, profiling, a lab's checks) load NumPy, CuPy "
        "and the run machinery, 0.3-0.8 s each; where a grading runs, not in the web process",
    ),
    (
        "app/core/database.py",
        "alembic*",
        "Alembic takes 0.9 s to load; only `kernelgrader db upgrade` and a first start need it",
    ),
]


# What sends a job; routes (a feature's api.py and pages.py) import none of it (rule 5).
SENDING = ("app.jobs.send", "app.jobs.sender")
ROUTES = ("api.py", "pages.py")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, "app.grading.worker"
    path: str  # its file, relative to the root
    line: int
    target: str  # the module imported (a module of the package where one matches)
    names: tuple[str, ...]  # the names taken with `from ... import`
    in_function: bool


@dataclass
class Finding:
    rule: str
    text: str


@dataclass
class House:
    root: Path
    package: str
    modules: dict[str, Path] = field(default_factory=dict)  # dotted name -> file
    imports: list[Import] = field(default_factory=list)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for child in ast.walk(node):
                if child is not node:
                    inside.add(id(child))
    return inside


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def read_house(root: Path, package: str) -> House:
    house = House(root=root, package=package)
    for path in sorted((root / package).rglob("*.py")):
        house.modules[module_name(root, path)] = path
    for name, path in house.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        inside = _function_nodes(tree)
        rel = str(path.relative_to(root))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    house.imports.append(
                        Import(name, rel, node.lineno, alias.name, (), id(node) in inside)
                    )
            elif isinstance(node, ast.ImportFrom):
                module = _resolve(name, path.name == "__init__.py", node)
                names = tuple(alias.name for alias in node.names)
                # `from app.x import m` names the module app.x.m where one exists.
                submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in house.modules]
                for target in submodules or [module]:
                    house.imports.append(
                        Import(name, rel, node.lineno, target, names, id(node) in inside)
                    )
    return house


def package_of(module: str, package: str) -> str | None:
    """The package's part a module belongs to: "app.grading.worker" -> "grading"."""
    parts = module.split(".")
    if parts[0] != package or len(parts) < 2:
        return None
    return parts[1]


def check_floors(house: House, floors: Sequence[str]) -> Iterator[Finding]:
    floor = {name: n for n, name in enumerate(floors)}
    for imp in house.imports:
        src = package_of(imp.source, house.package)
        dst = package_of(imp.target, house.package)
        if src is None or dst is None or src == dst:
            continue
        where = f"{imp.path}:{imp.line}: {src} imports {imp.target}"
        if src not in floor:
            yield Finding("floors", f"{where}, but {src} stands on no floor: add it to FLOORS")
        elif dst not in floor:
            yield Finding("floors", f"{where}, but {dst} stands on no floor: add it to FLOORS")
        elif floor[dst] >= floor[src]:
            way = "sideways" if floor[dst] == floor[src] else "upward"
            yield Finding(
                "floors",
                f"{where} ({way}: {dst} is on floor {floor[dst] + 1}, {src} on floor "
                f"{floor[src] + 1}); move what is needed down, or the caller up",
            )


def check_loops(house: House) -> Iterator[Finding]:
    graph: dict[str, set[str]] = {name: set() for name in house.modules}
    for imp in house.imports:
        if imp.target in graph and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    for component in _cycles(graph):
        chain = " -> ".join([*component, component[0]])
        yield Finding("loops", f"an import loop: {chain}")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def check_private(house: House) -> Iterator[Finding]:
    for imp in house.imports:
        src = package_of(imp.source, house.package)
        dst = package_of(imp.target, house.package)
        if dst is None or src == dst:
            continue
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        private += [p for p in imp.target.split(".") if p.startswith("_") and p != "__init__"]
        for name in private:
            yield Finding(
                "private",
                f"{imp.path}:{imp.line}: {src} takes the private name {name} of {imp.target}; "
                "make it public where it is, or move it",
            )


def check_lazy(house: House, lazy: Sequence[tuple[str, str, str]]) -> Iterator[Finding]:
    for imp in house.imports:
        if not imp.in_function:
            continue
        allowed = any(
            fnmatch.fnmatch(imp.path, files)
            and (
                fnmatch.fnmatch(imp.target, module)
                or imp.target == module
                or imp.target.startswith(module + ".")
            )
            for files, module, _why in lazy
        )
        if not allowed:
            yield Finding(
                "lazy",
                f"{imp.path}:{imp.line}: imports {imp.target} inside a function; put it at the "
                "top of the module (or, for a heavy optional dependency, give a reason in LAZY)",
            )


def check_routes_do_not_send(house: House, sending: Sequence[str]) -> Iterator[Finding]:
    for imp in house.imports:
        if Path(imp.path).name not in ROUTES:
            continue
        for module in sending:
            if imp.target == module or imp.target.startswith(module + "."):
                yield Finding(
                    "sending",
                    f"{imp.path}:{imp.line}: a route imports {imp.target}; let the service queue "
                    "the job with its unit of work (send_after_commit), sent at the commit",
                )


def check(
    root: Path,
    package: str = "app",
    floors: Sequence[str] | None = None,
    lazy: Sequence[tuple[str, str, str]] | None = None,
) -> list[Finding]:
    house = read_house(root, package)
    return [
        *check_floors(house, floors if floors is not None else [name for name, _ in FLOORS]),
        *check_loops(house),
        *check_private(house),
        *check_lazy(house, lazy if lazy is not None else LAZY),
        *check_routes_do_not_send(house, SENDING),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--package", default="app")
    args = parser.parse_args(argv)
    findings = check(args.root, args.package)
    for finding in findings:
        print(f"{finding.rule}: {finding.text}")
    if findings:
        rules = sorted({f.rule for f in findings})
        print(
            f"{len(findings)} imports break the rules ({', '.join(rules)}); see the rules at "
            f"the top of {Path(__file__).name}."
        )
        return 1
    print(f"{args.package}/: every import points down its floors; no loops.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
