"""What a cubin says each function does with shared memory and synchronisation (stdlib only).

Read from the tables ptxas writes, not from the source text: a `__shared__` array the compiler
removed, or a `__syncthreads()` in `#if 0`, is not here, and a helper the kernel calls counts for
the kernel (ptxas folds a callee's barriers and shared memory into its caller's entries). Checked
with NVRTC 13 for sm_75, sm_80, sm_86, sm_89 and sm_90:

- `.nv.shared.<function>`: the function uses shared memory (static, dynamic `extern
  __shared__`, or an atomic on it); `.nv.shared.reserved.*` is the system's, not the kernel's;
- EIATTR_NUM_BARRIERS (0x4c) in `.nv.info.<function>`: the barriers it uses (`__syncthreads`,
  `__syncthreads_count` and the like, `bar.sync` in inline assembly);
- EIATTR_COOP_GROUP_INSTR_OFFSETS (0x28): where its warp-synchronous instructions are
  (`__shfl_*_sync`, `__syncwarp`, `__ballot_sync` and the other votes, `__match_*_sync`,
  `__reduce_*_sync`): the instructions that take a mask of the lanes that must take part;
- EIATTR_NUM_MBARRIERS (0x38): asynchronous-barrier objects (sm_80 and later).

The compiler's PTX would say much the same, but it is not what runs: ptxas may still drop code,
and the cubin is what the sanitizer's launcher loads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from graders.compile.cubin import _sections, info_records

EIATTR_NUM_BARRIERS = 0x4C
EIATTR_COOP_GROUP_INSTR_OFFSETS = 0x28
EIATTR_NUM_MBARRIERS = 0x38
_SHARED = ".nv.shared."
_RESERVED = ".nv.shared.reserved."
_INFO = ".nv.info."


@dataclass(frozen=True)
class SyncFacts:
    """Which functions of a module use shared memory, barriers, warp-synchronous instructions."""

    shared: tuple[str, ...] = ()
    barriers: dict[str, int] = field(default_factory=dict)
    warp_sync: tuple[str, ...] = ()
    async_barriers: tuple[str, ...] = ()


def sync_facts(cubin: bytes) -> SyncFacts:
    """Shared memory, barriers and warp-synchronous instructions, by function (see the module
    docstring); raises graders.compile.cubin.CubinError for bytes that are no cubin."""
    shared: list[str] = []
    barriers: dict[str, int] = {}
    warp_sync: list[str] = []
    async_barriers: list[str] = []
    for section in _sections(cubin):
        name = section.name
        if name.startswith(_SHARED) and not name.startswith(_RESERVED):
            shared.append(name[len(_SHARED) :])
        elif name.startswith(_INFO):
            function = name[len(_INFO) :]
            data = cubin[section.offset : section.offset + section.size]
            for attr, value in info_records(data) or []:
                if attr == EIATTR_NUM_BARRIERS and len(value) >= 2:
                    (count,) = struct.unpack_from("<H", value)
                    if count:
                        barriers[function] = count
                elif attr == EIATTR_COOP_GROUP_INSTR_OFFSETS and value:
                    warp_sync.append(function)
                elif attr == EIATTR_NUM_MBARRIERS and value.strip(b"\0"):
                    async_barriers.append(function)
    return SyncFacts(tuple(shared), barriers, tuple(warp_sync), tuple(async_barriers))
