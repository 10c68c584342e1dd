"""The import check (scripts/import_check.py), run as CI runs it: it passes on app/ as it is,
and it fails, naming the import, on a house with a planted loop, a planted upward import, a
private name taken across packages, an unexplained import inside a function, or a route that
sends a job."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "import_check.py"


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def house(root: Path, files: dict[str, str]) -> Path:
    """A small `app/` under `root`: every package gets its __init__.py."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        for folder in path.relative_to(root).parents:
            if str(folder) != ".":
                (root / folder / "__init__.py").touch()
    return root


# A house that keeps every rule: the base below, a feature above it.
SOUND = {
    "app/core/database.py": "BASE = object\n",
    "app/users/models.py": "from app.core.database import BASE\n",
    "app/teams/service.py": "from app.users.models import BASE\n",
    "app/teams/api.py": "from app.teams.service import BASE\n",
}


def test_app_as_it_is_keeps_every_rule() -> None:
    done = check(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no loops" in done.stdout


def test_a_sound_house_passes(tmp_path: Path) -> None:
    done = check(house(tmp_path, SOUND))
    assert done.returncode == 0, done.stdout


def test_a_planted_loop_is_found(tmp_path: Path) -> None:
    root = house(
        tmp_path,
        {
            **SOUND,
            "app/teams/invites.py": "from app.teams import forming\n",
            # The loop closes inside a function: hiding it there does not hide it.
            "app/teams/forming.py": "def form():\n    from app.teams.invites import x\n",
        },
    )
    done = check(root)
    assert done.returncode == 1
    assert "loops: an import loop: app.teams.forming -> app.teams.invites" in done.stdout


def test_a_planted_upward_import_is_found(tmp_path: Path) -> None:
    root = house(tmp_path, {**SOUND, "app/core/mail.py": "from app.users.models import BASE\n"})
    done = check(root)
    assert done.returncode == 1
    assert "app/core/mail.py:1: core imports app.users.models (upward" in done.stdout
    # The rest of the house still keeps the rules: only that import is named.
    assert done.stdout.count("floors:") == 1


def test_a_feature_importing_one_above_it_is_upward(tmp_path: Path) -> None:
    root = house(
        tmp_path, {**SOUND, "app/teams/grades.py": "from app.grading.flows import after\n"}
    )
    root.joinpath("app/grading/flows.py").parent.mkdir(parents=True)
    root.joinpath("app/grading/__init__.py").touch()
    root.joinpath("app/grading/flows.py").write_text("after = 1\n")
    done = check(root)
    assert done.returncode == 1
    assert "teams imports app.grading.flows (upward" in done.stdout


def test_a_private_name_across_packages_is_found(tmp_path: Path) -> None:
    root = house(
        tmp_path,
        {
            **SOUND,
            "app/users/service.py": "def _secret():\n    return 1\n",
            "app/teams/roster.py": "from app.users.service import _secret\n",
        },
    )
    done = check(root)
    assert done.returncode == 1
    assert "teams takes the private name _secret of app.users.service" in done.stdout


def test_an_import_inside_a_function_needs_its_reason(tmp_path: Path) -> None:
    root = house(
        tmp_path,
        {
            **SOUND,
            "app/teams/export.py": (
                "def rows():\n    import csv\n    from app.users.models import BASE\n"
            ),
            # The CLI's commands load what they run: written in the allow-list.
            "app/cli/teams.py": "def team():\n    from app.teams.service import BASE\n",
        },
    )
    done = check(root)
    assert done.returncode == 1
    lazy = [line for line in done.stdout.splitlines() if line.startswith("lazy:")]
    assert [line.split(":")[1].strip() for line in lazy] == ["app/teams/export.py"] * 2


def test_a_route_that_sends_is_found(tmp_path: Path) -> None:
    root = house(
        tmp_path,
        {
            **SOUND,
            "app/jobs/sender.py": "def send_after_commit():\n    pass\n",
            "app/teams/pages.py": "from app.jobs.sender import send_after_commit\n",
            "app/teams/service.py": "from app.jobs.sender import send_after_commit\n",
        },
    )
    done = check(root)
    assert done.returncode == 1
    assert "sending: app/teams/pages.py:1: a route imports app.jobs.sender" in done.stdout
    assert "app/teams/service.py" not in done.stdout  # a service queues; that is its job
