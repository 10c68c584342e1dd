"""The pictures of the submission page and the staff's view of a lab, built from the services'
numbers (app.performance, app.gradebook.lab_roster) with app.web.charts."""

from __future__ import annotations

from markupsafe import Markup

from app.courses.models import Lab
from app.gradebook.lab_roster import StudentRow, kernel_time_groups
from app.performance.service import Performance
from app.web.charts import Bar, bar_chart, histogram, linear_bins, log_bins, meters
from app.web.templating import number


def submission_charts(perf: Performance) -> dict[str, Markup]:
    charts: dict[str, Markup] = {}
    bars = [Bar("your kernel", perf.median_ms, f"{number(perf.median_ms)} ms", highlight=True)]
    bars += [Bar(name, ms, f"{number(ms)} ms") for name, ms in perf.references]
    bars.sort(key=lambda b: b.value)
    charts["times"] = bar_chart(
        bars,
        title=f"Median time on {perf.case}: your kernel and the references (shorter is faster)",
    )
    rows = []
    if perf.gflops is not None:
        if perf.gflops >= 1000:
            text = f"{number(perf.gflops / 1e3)} TFLOP/s"
        else:
            text = f"{number(perf.gflops)} GFLOP/s"
        if perf.peak and perf.flops_fraction is not None:
            peak = perf.peak.tflops(perf.dtype)
            text += f" of {number(peak)} TFLOP/s ({perf.flops_fraction:.1%})"
        rows.append(("arithmetic", perf.flops_fraction or 0.0, text))
    if perf.gbs is not None:
        text = f"{number(perf.gbs)} GB/s"
        if perf.peak and perf.bandwidth_fraction is not None:
            text += f" of {number(perf.peak.bandwidth_gbs)} GB/s ({perf.bandwidth_fraction:.1%})"
        rows.append(("memory", perf.bandwidth_fraction or 0.0, text))
    if rows:
        charts["peaks"] = meters(
            rows, title=f"Achieved throughput against the peak of {perf.gpu_model}"
        )
    if perf.class_times_ms:
        charts["class"] = histogram(
            log_bins([*perf.class_times_ms, perf.median_ms]),
            title="The class's best times on this GPU model, with yours",
            x_label="median time on the timed case (ms, log scale)",
            marker=perf.median_ms,
        )
    return charts


def lab_charts(lab: Lab, rows: list[StudentRow]) -> dict[str, Markup | list[tuple[str, Markup]]]:
    scores = [r.cell.score for r in rows if r.cell.score is not None]
    top = lab.max_score or max(scores, default=1.0) or 1.0
    charts: dict[str, Markup | list[tuple[str, Markup]]] = {
        "scores": histogram(
            linear_bins(scores, low=0.0, high=top, count=10),
            title=f"Counted scores of {len(scores)} students",
            x_label=f"counted score (0 to {top:g})",
        )
    }
    charts["times"] = [
        (
            model,
            histogram(
                log_bins(times),
                title=f"Kernel times of the counted submissions on {model}",
                x_label=f"median time on the timed case, ms, log scale ({len(times)} on {model})",
            ),
        )
        for model, times in kernel_time_groups(rows)
    ]
    return charts
