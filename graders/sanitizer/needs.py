"""Which of compute-sanitizer's tools a submission needs, decided from its cubin.

- memcheck always (an access outside every array, a misaligned one), with its padding on;
- racecheck only where a kernel uses shared memory: the hazards it reports are races on it;
- synccheck only where a kernel uses barriers or warp-synchronous instructions (a mask of the
  lanes that must take part): those are what it checks.

The facts come from the tables ptxas wrote (graders.compile.cubin_info), in the sanitizer's
sandboxed child, never from the source text. A cubin that cannot be read runs every tool.
"""

from __future__ import annotations

from graders.compile.cubin import CubinError
from graders.compile.cubin_info import sync_facts
from graders.sanitizer.tool import TOOLS

ALWAYS = "always"


def tools_needed(cubin: bytes) -> dict[str, str]:
    """{tool: why it runs}, in TOOLS' order; a tool not named is not needed."""
    try:
        facts = sync_facts(cubin)
    except CubinError as exc:
        return {tool: f"the cubin could not be read ({exc})" for tool in TOOLS}
    needed = {"memcheck": ALWAYS}
    if facts.shared:
        needed["racecheck"] = "shared memory in " + ", ".join(sorted(facts.shared))
    synced = sorted({*facts.barriers, *facts.warp_sync, *facts.async_barriers})
    if synced:
        needed["synccheck"] = "barriers or warp-synchronous instructions in " + ", ".join(synced)
    return {tool: needed[tool] for tool in TOOLS if tool in needed}
