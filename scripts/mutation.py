"""Mutation testing of the modules that decide a grade, a charge or an access (by hand, not CI).

    .venv/bin/python scripts/mutation.py                 # every module below, one after another
    .venv/bin/python scripts/mutation.py graders/timing  # one module (or several)
    .venv/bin/python scripts/mutation.py --report-only   # the last run's results again

For each module, mutmut makes small changes to its code (a `<` made `<=`, a number changed by
one, a `+` made `-`, a string emptied, an argument dropped, ...) and runs, for each change, the
tests of that module that reach the changed function. A change that no test notices "survives".
The script prints, per module, how many mutants were killed, the percentage, and every survivor
with the reason it is left, read from scripts/mutation_survivors.toml (reviewed like code; a
survivor without an entry there is marked UNEXPLAINED; an entry may also name a whole function
that only a GPU reaches). Killed means a test failed, or the mutant ran past mutmut's time
limit (a loop that no longer ends); an explained survivor still counts as not killed. It exits 1
when a module is under the target (85 % killed) or a survivor is unexplained.

Why mutmut (3.8.1) and not cosmic-ray or pytest-gremlins:
- it records, in one pass of the module's tests, which test reaches which function, and then
  runs only those tests for a mutant of that function;
- each mutant runs in a process forked from one that has already imported the code and the
  tests (the app's tests import FastAPI, SQLAlchemy and Celery: seconds per import on this
  two-core machine), where cosmic-ray starts a fresh test run per mutant;
- `--max-children` bounds its worker processes (2 here: the machine is shared);
- it is the most used of the three and maintained; pytest-gremlins is young, and its coverage
  plugin and mutation switches would run inside the tests' own pytest process.
Its limit: mutmut 3 mutates code inside functions and methods only, not module-level constants
(`CLOCK_TOLERANCE = 0.05`); the tests pin those by testing both sides of each threshold.

Each module runs in a folder of its own under .mutation/ (ignored by git): links to the
project's files, and a pyproject.toml whose [tool.mutmut] names the module and its tests.
mutmut copies the project into that folder's mutants/ and runs there, so the working tree is
never changed. A run starts afresh (mutmut reuses copies it made earlier even where the
source changed since); --keep reuses the previous run's results instead.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".mutation"
SURVIVORS = REPO / "scripts" / "mutation_survivors.toml"
TARGET = 0.85
# What the tests read beside the code (labs, docs, migrations, the Docker files).
PROJECT_FILES = [
    "app",
    "graders",
    "migrations",
    "tests",
    "reference_kernels",
    "bench",
    "docker",
    "scripts",
    "README.md",
    "SECURITY.md",
    "alembic.ini",
    "setup.py",
]


@dataclass(frozen=True)
class Module:
    name: str  # as the issue lists it
    mutate: tuple[str, ...]  # globs of the files mutated
    tests: tuple[str, ...]  # the tests that exercise it
    pytest_args: tuple[str, ...] = ()  # e.g. -k, to pick the module's cases from a shared file
    # Where only some functions of the files decide (an access check inside a larger file):
    # globs of mutmut's mutant names, e.g. "app.courses.service.x_require_*" or, for a method,
    # "app.web.deps.xǁApiRequestǁuser__mutmut_*"; only those mutants are run and counted.
    only: tuple[str, ...] = ()


MODULES = [
    Module(
        "graders/timing",
        ("graders/timing/*.py",),
        ("tests/graders/timing", "tests/graders/run/test_harness.py"),
    ),
    Module(
        "graders/scoring",
        ("graders/scoring/*.py",),
        ("tests/graders/scoring", "tests/graders/test_grade.py"),
    ),
    Module(
        "graders/run/judge.py",
        ("graders/run/judge.py",),
        (
            "tests/graders/run/test_judge.py",
            "tests/graders/run/test_judge_order.py",
            "tests/graders/run/test_judge_python.py",
            "tests/graders/run/test_cases.py",
        ),
    ),
    Module(
        "graders/run/compare.py",
        ("graders/run/compare.py",),
        (
            "tests/graders/run/test_compare.py",
            "tests/graders/run/test_compare_limits.py",
            "tests/graders/run/test_judge.py",
            "tests/graders/run/test_cases.py",
            "tests/graders/test_tolerances.py",
        ),
    ),
    Module(
        "graders/sanitizer/stage.py",
        ("graders/sanitizer/stage.py",),
        ("tests/graders/sanitizer",),
    ),
    Module(
        "graders/run/memory.py",
        ("graders/run/memory.py",),
        ("tests/graders/run/test_memory.py",),
    ),
    Module(
        "graders/compile/declarations.py",
        ("graders/compile/declarations.py",),
        (
            "tests/graders/compile/test_declarations.py",
            "tests/graders/compile/test_declarations_limits.py",
            "tests/graders/compile/test_bounded_work.py",
        ),
        # The step counts of the declarations' reader only, of the parsers' bounded-work test.
        ("-k", "declarations"),
    ),
    Module(
        "app/courses/deadlines.py",
        ("app/courses/deadlines.py",),
        ("tests/app/courses", "tests/app/latedays"),
    ),
    Module(
        "app/courses/extensions.py",
        ("app/courses/extensions.py",),
        ("tests/app/courses", "tests/app/latedays", "tests/app/api/test_course_admin.py"),
    ),
    Module(
        "app/submissions/quota.py",
        ("app/submissions/quota.py",),
        ("tests/app/submissions", "tests/app/teams"),
    ),
    Module(
        "app/submissions/service.py",
        ("app/submissions/service.py",),
        (
            "tests/app/submissions",
            "tests/app/latedays",
            "tests/app/api/test_routes.py",
            # Two requests of one student racing for the last free slot (the row's turn).
            "tests/security/test_http.py::test_parallel_submissions_cannot_pass_the_last_free_slot_together",
        ),
    ),
    Module(
        "app/gradebook",
        ("app/gradebook/*.py", "app/policy/counting.py"),
        (
            "tests/app/gradebook",
            "tests/app/submissions/test_reads.py",
            "tests/app/teams",
            "tests/app/latedays",
            "tests/app/regrades",
            "tests/app/rubric",
            # The pages and API that show the gradebook and the staff's view of a lab.
            "tests/app/web/test_course_pages.py",
            "tests/app/api/test_course_admin.py",
        ),
    ),
    # The course policies of issue 20 and sign-in (issue 32).
    Module(
        "app/latedays",
        ("app/latedays/*.py", "app/policy/settle.py", "app/policy/recount.py"),
        (
            "tests/app/latedays",
            "tests/app/gradebook/test_policy_sums.py",
            "tests/app/web/test_policy_pages.py",
            "tests/app/test_cli_policies.py",
            # A refusing lab's sentence about the days left (the intake reads the balance).
            "tests/app/submissions/test_intake.py",
        ),
        # Not the thirty uploads at once: on this shared machine, with mutmut's children beside
        # it, the server's bound on requests in flight answers some of them 503 and the clean
        # run stops; on SQLite the write lock orders them anyway (the lock is tested on
        # PostgreSQL, which the run has not), so it kills no mutant here.
        ("-k", "not thirty_late_uploads_at_once"),
    ),
    Module(
        "app/teams",
        ("app/teams/*.py",),
        (
            "tests/app/teams",
            # A team's late submission charges each member it counts for (credited_users).
            "tests/app/latedays/test_balances.py",
            "tests/app/gradebook/test_roster.py",
            "tests/app/gradebook/test_policy_sums.py",
            "tests/app/web/test_policy_pages.py",
            "tests/app/test_cli_policies.py",
        ),
    ),
    Module(
        "app/regrades",
        ("app/regrades/*.py",),
        (
            "tests/app/regrades",
            "tests/app/web/test_policy_pages.py",
            "tests/app/test_cli_policies.py",
        ),
    ),
    Module(
        "app/rubric",
        ("app/rubric/*.py",),
        (
            "tests/app/rubric",
            "tests/app/regrades",
            "tests/app/gradebook/test_policy_sums.py",
            "tests/app/web/test_policy_pages.py",
            "tests/app/test_cli_policies.py",
        ),
    ),
    # What a report lists (the worker's side); the requests, reads and sweep are app/similarity.
    Module(
        "app/similarity/compute.py",
        ("app/similarity/compute.py",),
        ("tests/app/similarity", "tests/app/test_cli_policies.py"),
    ),
    Module(
        "app/similarity",
        (
            "app/similarity/service.py",
            "app/similarity/sweep.py",
            "app/similarity/schemas.py",
            "app/similarity/tasks.py",
        ),
        (
            "tests/app/similarity",
            "tests/app/web/test_policy_pages.py",
            "tests/app/test_cli_policies.py",
        ),
    ),
    # LTI: who a launch is and what role it gets, which course an LMS course opens, who may
    # register an LMS, and the scores sent to the LMS. Deep linking, the key store and the
    # registration forms' fields decide no grade or access of a student.
    Module(
        "app/lti",
        (
            "app/lti/launch.py",
            "app/lti/roles.py",
            "app/lti/linking.py",
            "app/lti/roster.py",
            "app/lti/scores.py",
            "app/lti/grades.py",
            "app/users/site_admins.py",
        ),
        ("tests/app/lti", "tests/app/auth/test_accounts.py"),
    ),
    Module(
        "app/sso",
        ("app/sso/service.py", "app/sso/oidc.py", "app/sso/saml.py", "app/sso/pages.py"),
        ("tests/app/sso", "tests/app/auth/test_accounts.py", "tests/app/test_cli_sign_in.py"),
    ),
    Module(
        "app/auth",
        ("app/auth/*.py",),
        ("tests/app/auth", "tests/app/sso", "tests/app/lti"),
    ),
    # Who may read or change what, in the API and pages of the modules above: the API routers
    # whole (each handler is its checks and a call), the pages' handlers, and the shared checks
    # they call (the course roles, a submission's readers, the token or login behind a request).
    Module(
        "permission checks",
        (
            "app/policy/api.py",
            "app/policy/pages.py",
            "app/regrades/api.py",
            "app/regrades/pages.py",
            "app/rubric/api.py",
            "app/teams/api.py",
            "app/teams/pages.py",
            "app/similarity/api.py",
            "app/similarity/pages.py",
            "app/courses/service.py",
            "app/courses/lifecycle.py",
            "app/catalog/pages.py",
            "app/submissions/service.py",
            "app/web/deps.py",
        ),
        (
            "tests/app/latedays",
            "tests/app/teams",
            "tests/app/regrades",
            "tests/app/rubric",
            "tests/app/similarity",
            "tests/app/api/test_permissions.py",
            "tests/app/web/test_permissions.py",
            "tests/app/web/test_policy_pages.py",
            "tests/app/web/test_routes.py",
            "tests/app/api/test_routes.py",
            "tests/app/submissions/test_intake.py",
            "tests/app/catalog",
        ),
        ("-k", "not thirty_late_uploads_at_once"),  # as app/latedays says
        only=(
            "app.policy.api.*",
            "app.policy.pages.*",
            "app.regrades.api.*",
            "app.regrades.pages.*",
            "app.rubric.api.*",
            "app.teams.api.*",
            "app.teams.pages.*",
            "app.similarity.api.*",
            "app.similarity.pages.*",
            "app.courses.service.x_role_in__mutmut_*",
            "app.courses.service.x_require_*",
            "app.courses.lifecycle.x_may_create_courses__mutmut_*",
            "app.courses.lifecycle.x_require_course_maker__mutmut_*",
            "app.catalog.pages.*",
            "app.submissions.service.x_visible_submission__mutmut_*",
            "app.web.deps.xǁApiRequestǁuser__mutmut_*",
            "app.web.deps.xǁWebRequestǁuser__mutmut_*",
        ),
    ),
]


def toml_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def slug(module: Module) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", module.name.removesuffix(".py")).strip("-")


def prepare(module: Module, *, keep: bool) -> Path:
    """The module's folder: links to the project and a pyproject.toml that configures mutmut."""
    folder = WORK / slug(module)
    if not keep and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        link = folder / name
        if not link.is_symlink() and (REPO / name).exists():
            link.symlink_to(REPO / name)
    config = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    config += f"""
[tool.mutmut]
source_paths = ["app", "graders"]
only_mutate = {toml_list(module.mutate)}
also_copy = {toml_list([n for n in PROJECT_FILES if n not in ("app", "graders")])}
pytest_add_cli_args = {toml_list(["-p", "no:cacheprovider", *module.pytest_args])}
pytest_add_cli_args_test_selection = {toml_list(module.tests)}
use_git_change_detection = false
"""
    (folder / "pyproject.toml").write_text(config, encoding="utf-8")
    return folder


def mutmut(folder: Path, *args: str, log: Path | None = None) -> str:
    command = [str(Path(sys.executable).parent / "mutmut"), *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if log is None:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        return done.stdout
    with log.open("w") as out:
        done = subprocess.run(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise SystemExit(f"mutmut run failed in {folder} (log: {log}):\n" + "\n".join(tail))
    return ""


@dataclass
class Mutant:
    name: str
    status: str
    file: str = ""
    function: str = ""
    removed: str = ""
    added: str = ""
    reason: str = ""


def results(folder: Path) -> list[Mutant]:
    found = []
    for line in mutmut(folder, "results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found.append(Mutant(name, status))
    return found


# `mutmut show NAME` for many names in one process (one `mutmut show` takes seconds to start).
SHOW_MANY = """
import json, sys
from mutmut.__main__ import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name) for name in json.load(sys.stdin)}))
"""


def diffs(folder: Path, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    done = subprocess.run(
        [sys.executable, "-c", SHOW_MANY],
        cwd=folder,
        input=json.dumps(names),
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    return {name: mutmut(folder, "show", name) for name in names}


def describe(mutant: Mutant, diff_text: str) -> None:
    """Fill in the file, function and changed lines from the mutant's diff."""
    diff = diff_text.splitlines()
    for line in diff:
        if line.startswith("--- "):
            mutant.file = line[4:].strip()
    minus = [ln[1:].strip() for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    mutant.removed, mutant.added = "\n".join(minus), "\n".join(plus)
    # graders.timing.peaks.x_floor_ms__mutmut_3, or a method: ...xǁGpuPeakǁtflops__mutmut_1
    tail = mutant.name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    mutant.function = tail.removeprefix("x_").removeprefix("x").replace("ǁ", ".").strip(".")


def explanations() -> list[dict[str, str]]:
    with SURVIVORS.open("rb") as handle:
        return list(tomllib.load(handle).get("survivor", []))


def explain(mutant: Mutant, known: list[dict[str, str]]) -> None:
    """The reason of the entry naming this mutant's change; an entry without `removed` and
    `added` names every mutant of its function that no test reaches ("no tests")."""
    for entry in known:
        if entry["file"] != mutant.file or entry["function"] != mutant.function:
            continue
        whole_function = "removed" not in entry and "added" not in entry
        if (whole_function and mutant.status == "no tests") or (
            not whole_function
            and entry["removed"].strip() == mutant.removed
            and entry["added"].strip() == mutant.added
        ):
            mutant.reason = entry["reason"]
            return


def chosen_mutants(module: Module, mutants: list[Mutant]) -> list[Mutant]:
    """The module's mutants, or with `only` those of the functions it names."""
    if not module.only:
        return mutants
    return [m for m in mutants if any(fnmatch.fnmatch(m.name, glob) for glob in module.only)]


def report(module: Module, mutants: list[Mutant], known: list[dict[str, str]]) -> bool:
    """Print the module's figures and survivors; True when it meets the target."""
    folder = WORK / slug(module)
    mutants = chosen_mutants(module, mutants)
    caught = {"killed", "timeout", "caught by type check", "segfault"}
    killed = sum(1 for m in mutants if m.status in caught)
    total = len(mutants)
    share = killed / total if total else 1.0
    left = [m for m in mutants if m.status not in caught]
    print(f"\n== {module.name}: {killed} of {total} mutants killed ({100 * share:.1f} %)")
    by_file: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_file.setdefault(m.name.rsplit(".", 1)[0].rsplit(".x", 1)[0], []).append(m)
    if len(by_file) > 1:
        for name, group in sorted(by_file.items()):
            k = sum(1 for m in group if m.status in caught)
            print(f"   {name}: {k} of {len(group)} ({100 * k / len(group):.1f} %)")
    unexplained = 0
    shown = diffs(folder, [m.name for m in left])
    for m in left:
        describe(m, shown.get(m.name, ""))
        explain(m, known)
        unexplained += not m.reason
        print(f"   {m.status}: {m.name} ({m.file}, {m.function})")
        print(f"      - {m.removed.replace(chr(10), chr(10) + '        ')}")
        print(f"      + {m.added.replace(chr(10), chr(10) + '        ')}")
        print(f"      why left: {m.reason or 'UNEXPLAINED (add it to ' + SURVIVORS.name + ')'}")
    reasons: dict[str, int] = {}
    for m in left:
        reasons[m.reason or "UNEXPLAINED"] = reasons.get(m.reason or "UNEXPLAINED", 0) + 1
    if left:
        print(f"   {module.name}: the {len(left)} left, by reason:")
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            print(f"      {count:4d}  {reason[:150]}")
    met = share >= TARGET and not unexplained
    verdict = "meets" if share >= TARGET else "is under"
    print(f"   {module.name} {verdict} the {100 * TARGET:.0f} % target; {unexplained} unexplained")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules as listed in MODULES (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutmut's worker processes")
    parser.add_argument("--keep", action="store_true", help="reuse the previous run's results")
    parser.add_argument("--report-only", action="store_true", help="print the last run's report")
    args = parser.parse_args()
    chosen = [m for m in MODULES if not args.modules or m.name in args.modules]
    unknown = set(args.modules) - {m.name for m in MODULES}
    if unknown:
        parser.error(f"unknown module(s) {sorted(unknown)}; known: {[m.name for m in MODULES]}")
    known = explanations()
    ok = True
    for module in chosen:
        folder = WORK / slug(module)
        if not args.report_only:
            folder = prepare(module, keep=args.keep)
            started = time.monotonic()
            print(f"mutating {module.name} (log: {folder / 'mutmut.log'})", flush=True)
            mutmut(
                folder,
                "run",
                "--max-children",
                str(args.jobs),
                *module.only,
                log=folder / "mutmut.log",
            )
            print(f"   done in {time.monotonic() - started:.0f} s", flush=True)
        ok = report(module, results(folder), known) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
