"""A profile summary (graders.profile.extract) as findings in sentences, on lines, ranked.

Each finding says what the kernel does, where (the line of the student's file, where the
counters name one), why it costs time and what to change, in words a second-year student
knows; the metric names it rests on go with it, for the page's "details" fold. Where NVIDIA's
own rule gave an estimated speedup, the finding carries it and is ranked by it.

Kinds (stable names: labs declare the ones they expect, `lab check` compares them):
- uncoalesced_global: a line's global loads or stores use a fraction of each 32-byte sector;
- global_atomics: a line's atomics on global memory scatter over many sectors or hold warps;
- bank_conflicts: a line's shared-memory accesses are served in several turns (n-way);
- divergence: at a line, many of a warp's 32 threads sit idle (a branch splits warps);
- occupancy: fewer warps than the SM could hold, and what limits them;
- small_grid: too few blocks to fill the GPU once;
- stall: what warps wait for most, and where;
- throughput: memory- or compute-bound, with the percent of peak (always one, last).

Pure Python: tested on saved reports without a GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graders.spec.model import PROFILE_FINDINGS

KINDS = PROFILE_FINDINGS
# Findings about how the code accesses memory or branches: what a lab's ladder may expect of
# a reference. The others (occupancy, stalls, throughput) describe every kernel somehow.
PATTERN_KINDS = ("uncoalesced_global", "global_atomics", "bank_conflicts", "divergence")
TITLES = {
    "uncoalesced_global": "Uncoalesced global memory access",
    "global_atomics": "Contended global atomics",
    "bank_conflicts": "Shared-memory bank conflicts",
    "divergence": "Warp divergence",
    "occupancy": "Low occupancy",
    "small_grid": "Grid too small for the GPU",
    "stall": "What warps wait for",
    "throughput": "Memory- or compute-bound",
}
# Where NVIDIA gives no estimate, a kind's place in the ranking (an estimate of 10 % outranks).
_DEFAULT_RANK = {
    "uncoalesced_global": 8.0,
    "global_atomics": 8.0,
    "bank_conflicts": 8.0,
    "divergence": 5.0,
    "occupancy": 3.0,
    "small_grid": 3.0,
    "stall": 1.0,
    "throughput": 0.0,
}
# The rules whose estimate belongs to a kind (the first that fired gives it).
_RULES = {
    "uncoalesced_global": ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern"),
    "global_atomics": ("UncoalescedGlobalAccess",),
    "bank_conflicts": ("SharedMemoryConflicts", "UncoalescedSharedAccess"),
    "divergence": ("ThreadDivergence",),
    "occupancy": ("AchievedOccupancy", "TheoreticalOccupancy"),
    "small_grid": ("SOLBottleneck", "LaunchConfiguration"),
    "stall": ("CPIStall",),
    "throughput": ("SOLBottleneck",),
}
# A line's access counts as a finding when at least this share of the kernel's sectors (or
# shared-memory wavefronts) are the line's excess, and at least this much of each is wasted.
MIN_EXCESS_SHARE = 0.05
MAX_USED_FRACTION = 0.75
MIN_STALL_SHARE = 0.25
DIVERGENT_THREADS = 24.0
MIN_IDLE_SHARE = 0.05  # of all the kernel's issue slots (32 per warp instruction)
LOW_WAVES = 0.8

STALL_WORDS = {
    "long_scoreboard": "data from global memory (a load that missed the caches)",
    "short_scoreboard": "results from shared memory or from special math instructions",
    "mio_throttle": "room in the queue of shared-memory and special instructions",
    "lg_throttle": "room in the queue of global-memory instructions (too many in flight)",
    "barrier": "the other warps of their block at __syncthreads()",
    "membar": "a memory fence",
    "drain": "their last stores to reach memory before they can exit",
    "wait": "a fixed delay between dependent instructions",
    "math_pipe_throttle": "a busy math unit",
    "tex_throttle": "the texture unit",
    "branch_resolving": "a branch target to be computed",
    "dispatch_stall": "the dispatcher",
    "no_instructions": "instructions to be fetched",
    "imc_miss": "constants to be fetched",
    "sleeping": "a sleep they asked for",
    "not_selected": "their turn (they were ready, another warp was picked)",
    "misc": "miscellaneous reasons",
}
_NOT_WAITING = ("selected",)
# The same, as a short title ("Warps wait most for global-memory loads").
STALL_SHORT = {
    "long_scoreboard": "global-memory loads",
    "short_scoreboard": "shared memory or special math",
    "mio_throttle": "the shared-memory queue",
    "lg_throttle": "the global-memory queue",
    "barrier": "__syncthreads()",
    "membar": "memory fences",
    "drain": "stores to drain at exit",
    "wait": "fixed instruction delays",
    "math_pipe_throttle": "busy math units",
    "not_selected": "their turn",
}


@dataclass
class ProfileFinding:
    kind: str
    title: str
    sentence: str
    line: int | None = None
    kernel: str = ""
    speedup: float | None = None  # NVIDIA's estimate, percent of the time it could save
    speedup_type: str = ""  # "global" (of the kernel) or "local" (of the part concerned)
    score: float = 0.0  # the ranking key
    metrics: dict[str, float] = field(default_factory=dict)  # ncu metric name -> value
    rule: str = ""  # NVIDIA's rule id behind it, where one
    rule_message: str = ""
    reason: str = ""  # for a stall: the stall reason's name ("long_scoreboard")

    @property
    def group(self) -> tuple[str, str]:
        """What a class summary counts it as: its kind, a stall by its reason; and a title."""
        if self.kind == "stall" and self.reason:
            words = STALL_SHORT.get(self.reason, self.reason.replace("_", " "))
            return f"stall:{self.reason}", f"Warps wait most for {words}"
        return self.kind, self.title

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fmt(value: float) -> str:
    return f"{value:,.0f}"


def _pct(value: float) -> str:
    return f"{value:.0f} %" if value >= 10 else f"{value:.1f} %"


def _rule(launch: dict[str, Any], kind: str, title: str = "") -> dict[str, Any] | None:
    for rule_id in _RULES.get(kind, ()):
        for rule in launch.get("rules", []):
            if rule["id"] != rule_id:
                continue
            if title and title.lower() not in rule.get("title", "").lower():
                continue
            return dict(rule)
    return None


def _estimate(finding: ProfileFinding, rule: dict[str, Any] | None) -> None:
    """Attach NVIDIA's rule (and its estimate, if any) and compute the ranking score."""
    if rule is not None:
        finding.rule = rule["id"]
        finding.rule_message = rule.get("message", "")
        for focus in rule.get("focus", []):
            finding.metrics.setdefault(focus["name"], focus["value"])
        if rule.get("speedup") is not None:
            finding.speedup = float(rule["speedup"])
            finding.speedup_type = rule.get("speedup_type", "global")
    base = _DEFAULT_RANK[finding.kind]
    if finding.speedup is not None:
        # A local estimate is of the part concerned only (a stall reason's share, say).
        weight = 1.0 if finding.speedup_type == "global" else 0.3
        finding.score = max(base, finding.speedup * weight)
    else:
        finding.score = base


def estimate_phrase(finding: ProfileFinding) -> str:
    """NVIDIA's estimate as a clause of its own ("" when none)."""
    if finding.speedup is None or finding.speedup < 1:
        return ""
    if finding.speedup_type == "global":
        return (
            f"Nsight Compute estimates that fixing it could save up to {_pct(finding.speedup)} "
            "of the kernel's time."
        )
    return (
        f"Nsight Compute estimates that fixing it could save up to {_pct(finding.speedup)} of "
        "the time this part takes."
    )


def _at(line: int | None, kernel: str, several: bool) -> str:
    where = f"Line {line}" if line else "The kernel"
    return f"{where} (kernel {kernel})" if several and kernel else where


def _total(lines: dict[str, dict[str, Any]], key: str) -> float:
    return sum(float(row.get(key, 0.0)) for row in lines.values())


def _memory_findings(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    lines = launch.get("lines", {})
    kernel = launch.get("kernel", "")
    all_sectors = sum(_total(lines, f"{k}_sectors") for k in ("load", "store", "atomic"))
    out: list[ProfileFinding] = []
    if all_sectors <= 0:
        return out
    for number, row in lines.items():
        for access in ("load", "store", "atomic"):
            sectors = float(row.get(f"{access}_sectors", 0.0))
            ideal = float(row.get(f"{access}_sectors_ideal", 0.0))
            excess = sectors - ideal
            if sectors <= 0 or excess / all_sectors < MIN_EXCESS_SHARE:
                continue
            used = 32.0 * ideal / sectors
            if used / 32.0 > MAX_USED_FRACTION:
                continue
            line = int(number)
            metrics = {
                "memory_l2_theoretical_sectors_global": sectors,
                "memory_l2_theoretical_sectors_global_ideal": ideal,
                "derived__memory_l2_theoretical_sectors_global_excessive": excess,
            }
            share = excess / all_sectors
            where = _at(line, kernel, several)
            if access == "atomic":
                requests = float(row.get("ops", {}).get("atomic", 0.0)) or 1.0
                finding = ProfileFinding(
                    kind="global_atomics",
                    title=TITLES["global_atomics"],
                    line=line,
                    kernel=kernel,
                    metrics=metrics,
                    sentence=(
                        f"{where} adds to global memory with atomics that land on "
                        f"{sectors / requests:.1f} different 32-byte sectors per warp "
                        f"instruction instead of {ideal / requests:.1f}: every thread of the "
                        f"grid updates the same few addresses in the L2 cache, one after "
                        f"another ({_fmt(excess)} extra sectors, "
                        f"{_pct(share * 100)} of the kernel's memory traffic). Add into a "
                        "per-block copy in shared memory first, then add each block's totals "
                        "to global memory once."
                    ),
                )
                _estimate(finding, _rule(launch, "global_atomics"))
            else:
                verb = "reads" if access == "load" else "writes"
                metric = f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{access[:2]}"
                metrics[f"{metric}.ratio"] = used
                finding = ProfileFinding(
                    kind="uncoalesced_global",
                    title=TITLES["uncoalesced_global"],
                    line=line,
                    kernel=kernel,
                    metrics=metrics,
                    sentence=(
                        f"{where} {verb} global memory with a stride between neighbouring "
                        f"threads: of each 32-byte sector it moves, only {used:.1f} bytes are "
                        f"used ({_fmt(excess)} extra sectors, {_pct(share * 100)} of all the "
                        f"kernel's sectors). Let threadIdx.x, threadIdx.x + 1, ... {verb[:-1]} "
                        "neighbouring addresses, for instance by going through a tile in "
                        "shared memory."
                    ),
                )
                title = "Load" if access == "load" else "Store"
                _estimate(
                    finding, _rule(launch, "uncoalesced_global") or _rule_title(launch, title)
                )
            out.append(finding)
    # NVIDIA's estimate is for the whole kernel: it belongs to the line with the most excess.
    for kind in ("uncoalesced_global", "global_atomics"):
        same = sorted(
            (f for f in out if f.kind == kind),
            key=lambda f: -f.metrics["derived__memory_l2_theoretical_sectors_global_excessive"],
        )
        for other in same[1:]:
            other.speedup, other.speedup_type = None, ""
            other.score = _DEFAULT_RANK[kind]
    return out


def _rule_title(launch: dict[str, Any], title: str) -> dict[str, Any] | None:
    return _rule(launch, "uncoalesced_global", title)


def _shared_findings(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    lines = launch.get("lines", {})
    kernel = launch.get("kernel", "")
    total = sum(
        _total(lines, f"shared_{k}_wavefronts") for k in ("load", "store", "atomic")
    ) or float(launch.get("metrics", {}).get("shared_wavefronts", 0.0))
    out: list[ProfileFinding] = []
    if total <= 0:
        return out
    for number, row in lines.items():
        # Not atomics: their extra turns are mostly lanes updating the same word (a histogram's
        # popular bins; histogram's shared-atomics reference showed "3-way" on an H100), which
        # ncu counts as conflicts and no padding removes.
        for access in ("load", "store"):
            waves = float(row.get(f"shared_{access}_wavefronts", 0.0))
            ideal = float(row.get(f"shared_{access}_wavefronts_ideal", 0.0))
            excess = waves - ideal
            if waves <= 0 or ideal <= 0 or excess / total < MIN_EXCESS_SHARE:
                continue
            ways = max(float(row.get("shared_nway", 0.0)), waves / ideal)
            if ways < 1.5:
                continue
            line = int(number)
            verb = {"load": "reads", "store": "writes"}[access]
            finding = ProfileFinding(
                kind="bank_conflicts",
                title=TITLES["bank_conflicts"],
                line=line,
                kernel=kernel,
                metrics={
                    "derived__memory_l1_conflicts_shared_nway": ways,
                    "memory_l1_wavefronts_shared": waves,
                    "memory_l1_wavefronts_shared_ideal": ideal,
                    "derived__memory_l1_wavefronts_shared_excessive": excess,
                },
                sentence=(
                    f"{_at(line, kernel, several)} {verb} shared memory with a {ways:.0f}-way "
                    f"bank conflict: the threads of a warp hit the same memory bank, so each "
                    f"access is served in {ways:.0f} turns instead of one ({_fmt(excess)} extra "
                    f"turns, {_pct(100 * excess / total)} of the kernel's shared-memory traffic). "
                    "Pad the array by one column (tile[32][33] instead of tile[32][32]), or "
                    "index it so neighbouring threads use neighbouring words."
                ),
            )
            title = {"load": "Load", "store": "Store"}[access]
            _estimate(
                finding,
                _rule(launch, "bank_conflicts", title) or _rule(launch, "bank_conflicts"),
            )
            out.append(finding)
    ranked = sorted(out, key=lambda f: -f.metrics["derived__memory_l1_wavefronts_shared_excessive"])
    for other in ranked[1:]:
        other.speedup, other.speedup_type = None, ""
        other.score = _DEFAULT_RANK["bank_conflicts"]
    return out


def _working_share(row: dict[str, Any]) -> float:
    """The share of a line's warp instructions that some lane of the warp did work in.

    The compiler predicates a short `if` rather than branching, so warps in which no lane
    works still issue the line's instructions, with every lane off. Those warps wait together,
    which is what a reduction's `t < stride` is for: on an H100, array-sum's sequential tree
    kept 3.2 of 32 lanes on per instruction of its `sdata[t] += ...` line, as the interleaved
    `t % (2 * stride) == 0` did, yet only 11 % of its warps there did any work (with 28 lanes
    on), against 60 % of the interleaved kernel's (with 5). A shared-memory access that some
    lane makes takes at least one wavefront, and one that no lane makes takes none: the line's
    ideal wavefronts per shared instruction bound that share from above (1 where it has none).
    """
    ops = row.get("ops", {})
    shares = [
        float(row.get(f"{access}_wavefronts_ideal", 0.0)) / float(ops[access])
        for access in ("shared_load", "shared_store")
        if float(ops.get(access, 0.0)) > 0
    ]
    return min(1.0, *shares) if shares else 1.0


def _divergence(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    metrics = launch.get("metrics", {})
    lines = launch.get("lines", {})
    kernel = launch.get("kernel", "")
    active = metrics.get("threads_on_per_inst")
    rule = _rule(launch, "divergence")
    # The kernel as a whole keeps most lanes busy and NVIDIA's rule says nothing: no lesson.
    # A line's low count alone is not one: a bounds check's `@P0 EXIT`, predicated off in
    # every lane, is a line of two instructions at 16 of 32 in a kernel of a dozen (every
    # reference of vector-scale was told "divergence" on an H100 without this).
    if (active is None or active >= DIVERGENT_THREADS) and rule is None:
        return []
    idle: dict[int, float] = {}
    working: dict[int, float] = {}  # the line's warp instructions in which some lane worked
    slots = 0.0
    for number, row in lines.items():
        inst = float(row.get("inst", 0.0))
        on = float(row.get("thread_inst_true", row.get("thread_inst", 0.0)))
        if inst > 0:
            working[int(number)] = inst * _working_share(row)
            idle[int(number)] = 32.0 * working[int(number)] - on
            slots += 32.0 * inst
    if not idle or slots <= 0:
        return []
    line, lost = max(idle.items(), key=lambda item: item[1])
    row = lines[str(line)]
    if working[line] <= 0:
        return []
    per_inst = float(row.get("thread_inst_true", 0.0)) / working[line]
    # A line where most lanes idle, and whose idle lanes are a real part of all the kernel's
    # issue slots (a reduction's last rounds in a kernel that mostly streams are not).
    if per_inst >= DIVERGENT_THREADS or lost / slots < MIN_IDLE_SHARE:
        return []
    whole = f" (the kernel as a whole: {active:.1f} of 32)" if active is not None else ""
    finding = ProfileFinding(
        kind="divergence",
        title=TITLES["divergence"],
        line=line,
        kernel=kernel,
        metrics={
            "inst_executed": float(row["inst"]),
            "thread_inst_executed_true": float(row.get("thread_inst_true", 0.0)),
            "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio": float(active or 0.0),
        },
        sentence=(
            f"{_at(line, kernel, several)} runs with only {per_inst:.1f} of a warp's 32 threads "
            f"doing the work on average{whole}; the others wait, since a warp executes one "
            "instruction for all its threads. An `if` on threadIdx that splits every warp (such "
            "as `t % (2 * stride) == 0`) does this: pick the working threads so that whole "
            "warps work or wait together (such as `t < stride`)."
        ),
    )
    _estimate(finding, rule)
    return [finding]


_LIMITS = {
    "limit_registers": "the {registers:.0f} registers each thread uses",
    "limit_shared_mem": "the {shared:.0f} bytes of shared memory each block uses",
    "limit_warps": "the block size of {block:.0f} threads",
    "limit_blocks": "the most blocks an SM may hold at once (small blocks of {block:.0f} threads)",
    "limit_barriers": "the barriers each block uses",
}


def _occupancy(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    m = launch.get("metrics", {})
    kernel = launch.get("kernel", "")
    achieved = m.get("achieved_occupancy_pct")
    theoretical = m.get("theoretical_occupancy_pct")
    if achieved is None or theoretical is None:
        return []
    limits = {k: m[k] for k in _LIMITS if k in m}
    where = f"Kernel {kernel}: o" if several and kernel else "O"
    details = {
        "sm__warps_active.avg.pct_of_peak_sustained_active": achieved,
        "sm__maximum_warps_per_active_cycle_pct": theoretical,
    }
    for key, value in limits.items():
        details[f"launch__occupancy_{key}"] = value
    if theoretical < 75 and limits:
        limiter = min(limits, key=lambda k: limits[k])
        words = _LIMITS[limiter].format(
            registers=m.get("registers", 0),
            shared=m.get("shared_static_bytes", 0) + m.get("shared_dynamic_bytes", 0),
            block=m.get("block_size", 0),
        )
        sentence = (
            f"{where}ccupancy is at most {_pct(theoretical)} (achieved {_pct(achieved)}): an SM "
            f"can hold only {limits[limiter]:.0f} blocks at once because of {words}, so it has "
            "fewer warps to switch to while others wait for memory. Use fewer registers or "
            "less shared memory per block, or a block size that fits more blocks per SM."
        )
        rule = _rule(launch, "occupancy")
    elif achieved < theoretical - 20:
        sentence = (
            f"{where}nly {_pct(achieved)} of the SM's warp slots are busy on average, of a "
            f"possible {_pct(theoretical)}: blocks finish at different times or the last wave "
            "of blocks is partly empty, so SMs sit idle part of the time. Even out the work per "
            "block, or give each thread more work and launch fewer, fuller waves."
        )
        rule = _rule(launch, "occupancy")
    else:
        return []
    finding = ProfileFinding(
        kind="occupancy",
        title=TITLES["occupancy"],
        kernel=kernel,
        metrics=details,
        sentence=sentence,
    )
    _estimate(finding, rule)
    return [finding]


def _small_grid(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    m = launch.get("metrics", {})
    waves = m.get("waves")
    if waves is None or waves >= LOW_WAVES:
        return []
    kernel = launch.get("kernel", "")
    who = f"Kernel {kernel}'s grid" if several and kernel else "The grid"
    finding = ProfileFinding(
        kind="small_grid",
        title=TITLES["small_grid"],
        kernel=kernel,
        metrics={
            "launch__waves_per_multiprocessor": waves,
            "launch__grid_size": m.get("grid_size", 0),
        },
        sentence=(
            f"{who} of {m.get('grid_size', 0):.0f} blocks fills the GPU only "
            f"{_pct(waves * 100)} of the way once: some SMs get no block and sit idle. "
            "Launch more blocks (fewer elements per thread, or smaller blocks), so every SM "
            "has work."
        ),
    )
    _estimate(finding, _rule(launch, "small_grid", "Small Grid"))
    return [finding]


def _stall(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    lines = launch.get("lines", {})
    kernel = launch.get("kernel", "")
    by_reason: dict[str, float] = {}
    for row in lines.values():
        for reason, samples in row.get("stalls", {}).items():
            by_reason[reason] = by_reason.get(reason, 0.0) + float(samples)
    total = sum(v for k, v in by_reason.items() if k not in _NOT_WAITING)
    if total <= 0:
        return []
    reason = max((k for k in by_reason if k not in _NOT_WAITING), key=lambda k: by_reason[k])
    share = by_reason[reason] / total
    if share < MIN_STALL_SHARE:
        return []
    line = max(
        (int(n) for n in lines),
        key=lambda n: float(lines[str(n)].get("stalls", {}).get(reason, 0.0)),
    )
    at_line = float(lines[str(line)].get("stalls", {}).get(reason, 0.0)) / by_reason[reason]
    words = STALL_WORDS.get(reason, reason.replace("_", " "))
    who = f"In kernel {kernel}, w" if several and kernel else "W"
    finding = ProfileFinding(
        kind="stall",
        title=TITLES["stall"],
        line=line,
        kernel=kernel,
        reason=reason,
        metrics={
            f"smsp__pcsamp_warps_issue_stalled_{reason}": by_reason[reason],
            "smsp__pcsamp_sample_count": float(launch.get("metrics", {}).get("stall_samples", 0)),
        },
        sentence=(
            f"{who}arps spend most of their waiting time ({_pct(share * 100)} of the "
            f"samples) waiting for {words}; {_pct(at_line * 100)} of that waiting is at "
            f"line {line}."
        ),
    )
    title = reason.replace("_", " ")
    _estimate(finding, _rule(launch, "stall", title))
    return [finding]


def _throughput(launch: dict[str, Any], several: bool) -> list[ProfileFinding]:
    m = launch.get("metrics", {})
    memory, compute = m.get("memory_pct"), m.get("compute_pct")
    if memory is None or compute is None:
        return []
    kernel = launch.get("kernel", "")
    who = f"Kernel {kernel} is " if several and kernel else "The kernel is "
    if max(memory, compute) >= 60 and memory >= compute:
        sentence = (
            f"{who}memory-bound: it keeps the memory system {_pct(memory)} busy and the SMs' "
            f"arithmetic {_pct(compute)}; it can go faster only by moving fewer bytes, or "
            "wasting fewer of those it moves."
        )
    elif max(memory, compute) >= 60:
        sentence = (
            f"{who}compute-bound: its instructions keep the SMs {_pct(compute)} busy and the "
            f"memory system {_pct(memory)}; it can go faster only by doing fewer instructions "
            "per result."
        )
    else:
        sentence = (
            f"{who}limited by latency: neither memory ({_pct(memory)} of peak) nor "
            f"arithmetic ({_pct(compute)}) is near its peak, so warps spend their time "
            "waiting; the main wait is named above."
        )
    finding = ProfileFinding(
        kind="throughput",
        title=TITLES["throughput"],
        kernel=kernel,
        metrics={
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": memory,
            "sm__throughput.avg.pct_of_peak_sustained_elapsed": compute,
        },
        sentence=sentence,
    )
    _estimate(finding, None)
    return [finding]


def findings_of(summary: dict[str, Any]) -> list[ProfileFinding]:
    """Every finding of every profiled launch, best first (NVIDIA's estimate, then kind)."""
    launches = summary.get("launches", [])
    several = len({launch.get("kernel") for launch in launches}) > 1
    out: list[ProfileFinding] = []
    for launch in launches:
        for make in (
            _memory_findings,
            _shared_findings,
            _divergence,
            _occupancy,
            _small_grid,
            _stall,
            _throughput,
        ):
            out += make(launch, several)
    out.sort(key=lambda f: (-f.score, KINDS.index(f.kind), f.line or 0))
    # A kernel launched twice (a multi-pass lab) finds the same thing twice: keep the first.
    seen: set[tuple[str, int | None, str]] = set()
    unique = []
    for f in out:
        key = (f.kind, f.line, f.kernel)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def with_estimate(finding: ProfileFinding) -> str:
    """The finding's sentence followed by NVIDIA's estimate, where there is one."""
    estimate = estimate_phrase(finding)
    return f"{finding.sentence} {estimate}" if estimate else finding.sentence


def kinds_at_lines(findings: list[ProfileFinding]) -> dict[int, list[str]]:
    """Line -> the kinds found there (for marking the source view)."""
    out: dict[int, list[str]] = {}
    for f in findings:
        if f.line and f.kind in PATTERN_KINDS + ("stall",):
            out.setdefault(f.line, [])
            if f.kind not in out[f.line]:
                out[f.line].append(f.kind)
    return out
