"""An Nsight Compute report, read into plain data: per launch, the figures, NVIDIA's rule
results and per-line counters of the submission's own file.

Read with NVIDIA's `ncu_report` module (the `ncu-report` package, or the copy shipped beside
ncu in `extras/python`), imported only here and only when a report is read: the engine
imports nothing beyond NumPy and CuPy at module level. Why the report and not ncu's CSV pages:
the report holds every metric per instruction address with its source line, typed; the CSV
pages are text meant for people (thousands separators, units scaled per row, per-line
counters only as a rendered source view) and need ncu itself to produce.

The summary is JSON-ready and bounded: the metrics named in METRICS, the rules that fired
(with their message and estimated speedup), and per source line of the submission's file the
counters the findings read (graders.profile.findings).
"""

from __future__ import annotations

import importlib
import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Whole-kernel metrics kept per launch (name -> a short key used by the findings and figures).
METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__occupancy_limit_registers": "limit_registers",
    "launch__occupancy_limit_shared_mem": "limit_shared_mem",
    "launch__occupancy_limit_warps": "limit_warps",
    "launch__occupancy_limit_blocks": "limit_blocks",
    "launch__occupancy_limit_barriers": "limit_barriers",
    "launch__registers_per_thread": "registers",
    "launch__block_size": "block_size",
    "launch__grid_size": "grid_size",
    "launch__waves_per_multiprocessor": "waves",
    "launch__shared_mem_per_block_static": "shared_static_bytes",
    "launch__shared_mem_per_block_dynamic": "shared_dynamic_bytes",
    "device__attribute_max_warps_per_multiprocessor": "max_warps_per_sm",
    "smsp__thread_inst_executed_per_inst_executed.ratio": "threads_per_inst",
    "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio": "threads_on_per_inst",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio": "load_bytes_per_sector",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio": "store_bytes_per_sector",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "shared_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "shared_bank_conflicts",
    "smsp__sass_inst_executed_op_shared_ld.sum": "shared_load_requests",
    "smsp__sass_inst_executed_op_shared_st.sum": "shared_store_requests",
    "smsp__pcsamp_sample_count": "stall_samples",
}
# Per-instruction metrics summed into each source line (instance values by address).
LINE_METRICS = {
    "memory_l2_theoretical_sectors_global": "sectors",
    "memory_l2_theoretical_sectors_global_ideal": "sectors_ideal",
    "memory_l1_wavefronts_shared": "shared_wavefronts",
    "memory_l1_wavefronts_shared_ideal": "shared_wavefronts_ideal",
    "inst_executed": "inst",
    "thread_inst_executed": "thread_inst",
    "thread_inst_executed_true": "thread_inst_true",
}
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
# Global-memory instructions by their SASS opcode.
_LOADS = ("LDG", "LD.")
_STORES = ("STG", "ST.")
_ATOMICS = ("RED", "ATOM")
_SHARED_LOADS = ("LDS", "LDSM")
_SHARED_STORES = ("STS",)
_SHARED_ATOMICS = ("ATOMS",)
MAX_RULES = 40
MAX_LINES = 400


class ReportError(RuntimeError):
    """The report could not be read; the message says why."""


def load_reader(extra_folders: Iterable[str] = ()) -> Any:
    """NVIDIA's ncu_report module: the installed package, else the copy beside ncu."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for folder in extra_folders:
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            continue
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _instances(action: Any, name: str) -> dict[int, float]:
    """address -> value of an instanced metric ({} when the report lacks it)."""
    metric = action.metric_by_name(name)
    if metric is None or metric.num_instances() == 0 or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    out: dict[int, float] = {}
    for i in range(metric.num_instances()):
        value = metric.as_double(i)
        if math.isfinite(value):
            out[int(ids.as_uint64(i))] = value
    return out


def _opcode(sass: str) -> str:
    """The opcode of a SASS line ("@!P0  LDG.E R2, ..." -> "LDG.E")."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def _kind_of(opcode: str) -> str:
    if opcode.startswith(_SHARED_ATOMICS):
        return "shared_atomic"
    if opcode.startswith(_SHARED_LOADS):
        return "shared_load"
    if opcode.startswith(_SHARED_STORES):
        return "shared_store"
    if opcode.startswith(_ATOMICS):
        return "atomic"
    if opcode.startswith(_LOADS):
        return "load"
    if opcode.startswith(_STORES):
        return "store"
    return "other"


def plain_message(text: str) -> str:
    """A rule message without ncu's link markup ("@url:Guide:https://...@" -> "Guide")."""

    def keep(match: re.Match[str]) -> str:
        body = match.group(0)[1:-1]
        kind, _, rest = body.partition(":")
        if kind == "url":
            return rest.split(":", 1)[0]
        if kind == "section":
            return rest.split(":", 1)[-1]
        return rest.rsplit(":", 1)[-1]

    return re.sub(r"@(?:url|section|sass|source):[^@]*@", keep, text)


def _rules(action: Any) -> list[dict[str, Any]]:
    """NVIDIA's rule results that said something, with their estimated speedup."""
    rules = []
    for result in action.rule_results_as_dicts():
        message = result.get("rule_message") or {}
        text = str(message.get("message") or "")
        if not text.strip():
            continue
        rule: dict[str, Any] = {
            "id": str(result.get("rule_identifier", "")),
            "section": str(result.get("section_identifier", "")),
            "title": str(message.get("title") or ""),
            "message": plain_message(text)[:2000],
        }
        estimate = result.get("speedup_estimation") or {}
        speedup = _number(estimate.get("speedup"))
        if speedup is not None:
            rule["speedup"] = round(speedup, 2)
            # SpeedupType 2 is global (of the kernel's time), 1 local (of the part concerned).
            rule["speedup_type"] = "global" if int(estimate.get("type", 0)) == 2 else "local"
        focus = []
        for metric in result.get("focus_metrics") or []:
            value = _number(metric.get("value"))
            if value is not None:
                focus.append({"name": str(metric.get("name", "")), "value": value})
        rule["focus"] = focus[:8]
        rules.append(rule)
    return rules[:MAX_RULES]


def _lines(action: Any, filename: str) -> tuple[dict[str, dict[str, Any]], str]:
    """Per source line of `filename` (or of the one file the kernel has), the counters."""
    per_line: dict[int, dict[str, Any]] = {}
    values = {key: _instances(action, name) for name, key in LINE_METRICS.items()}
    stalls: dict[str, dict[int, float]] = {}
    for name in action.metric_names():
        if name.startswith(STALL_PREFIX) and not name.endswith("_not_issued"):
            stalls[name[len(STALL_PREFIX) :]] = _instances(action, name)
    shared_nway = _instances(action, "derived__memory_l1_conflicts_shared_nway")
    addresses: set[int] = set()
    for table in (*values.values(), *stalls.values()):
        addresses.update(table)
    files: dict[str, int] = {}
    located: dict[int, tuple[str, int]] = {}
    for pc in addresses:
        info = action.source_info(pc)
        if info is None:
            continue
        name, line = info.file_name(), int(info.line())
        located[pc] = (name, line)
        files[name] = files.get(name, 0) + 1
    wanted = next((f for f in files if Path(f).name == filename), None)
    if wanted is None and len(files) == 1:
        wanted = next(iter(files))
    for pc, (name, line) in located.items():
        if name != wanted or line <= 0:
            continue
        row = per_line.setdefault(line, {"stalls": {}, "ops": {}})
        opcode = _opcode(action.sass_by_pc(pc) or "")
        kind = _kind_of(opcode)
        for key, table in values.items():
            if pc not in table:
                continue
            value = table[pc]
            if key.startswith("sectors"):
                if kind in ("load", "store", "atomic"):
                    name = f"{kind}_{key}"  # load_sectors, store_sectors_ideal, ...
                    row[name] = row.get(name, 0.0) + value
            elif key.startswith("shared_"):
                if kind.startswith("shared_"):
                    name = kind + key[len("shared") :]  # shared_load_wavefronts, ...
                    row[name] = row.get(name, 0.0) + value
            else:
                row[key] = row.get(key, 0.0) + value
        if kind != "other" and values["inst"].get(pc):
            row["ops"][kind] = row["ops"].get(kind, 0.0) + values["inst"][pc]
        if pc in shared_nway and kind.startswith("shared"):
            row["shared_nway"] = max(row.get("shared_nway", 0.0), shared_nway[pc])
        for reason, table in stalls.items():
            if table.get(pc):
                row["stalls"][reason] = row["stalls"].get(reason, 0.0) + table[pc]
    kept = sorted(per_line.items(), key=lambda item: -item[1].get("inst", 0.0))[:MAX_LINES]
    return {str(line): row for line, row in sorted(kept)}, Path(wanted or "").name


def summarize_action(action: Any, *, filename: str) -> dict[str, Any]:
    """One profiled launch as plain data (see the module docstring)."""
    metrics: dict[str, float] = {}
    for name, key in METRICS.items():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        value = _number(metric.value())
        if value is not None:
            metrics[key] = value
    grid = [action.metric_by_name(f"launch__grid_dim_{d}") for d in "xyz"]
    block = [action.metric_by_name(f"launch__block_dim_{d}") for d in "xyz"]
    lines, source = _lines(action, filename)
    return {
        "kernel": str(action.name()),
        "grid": [int(m.value()) if m is not None else 1 for m in grid],
        "block": [int(m.value()) if m is not None else 1 for m in block],
        "metrics": metrics,
        "rules": _rules(action),
        "lines": lines,
        "source_file": source,
    }


def summarize_report(path: str | Path, *, filename: str, reader: Any) -> dict[str, Any]:
    """Every profiled launch of a report, in launch order, with the GPU it ran on."""
    try:
        context = reader.load_report(str(path))
    except Exception as exc:
        raise ReportError(f"Nsight Compute's report could not be read ({exc})") from exc
    if context.num_ranges() == 0:
        # ncu writes no report when it profiled nothing: this file is not one of its reports.
        raise ReportError("Nsight Compute's report could not be read (it holds no profile)")
    launches = []
    gpu = ""
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for i in range(profiled.num_actions()):
            action = profiled.action_by_idx(i)
            launches.append(summarize_action(action, filename=filename))
            name = action.metric_by_name("device__attribute_display_name")
            gpu = gpu or (str(name.value()) if name is not None else "")
    return {"gpu": gpu, "launches": launches}
