"""The history chart: a student's submissions to a lab, their times against the references,
the best so far marked (SVG drawn on the server, as app.web.charts)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

from app.profiling.views import HistoryPoint
from app.web.charts import ACCENT, HIGHLIGHT, MUTED, WIDTH, svg
from app.web.templating import number


def _tooltip(p: HistoryPoint) -> str:
    parts = [f"Submission {p.submission_id} (#{p.number})"]
    if p.median_ms is not None:
        parts.append(f"{number(p.median_ms)} ms" + ("" if p.all_passed else ", not all passed"))
    parts += [f"{ratio:.2f}x {name}'s time" for name, ratio in sorted(p.ratios.items())]
    if p.peak_percent is not None:
        parts.append(f"{p.peak_percent:.1f} % of the {p.peak_kind} peak")
    if p.top_finding:
        parts.append(f"top finding: {p.top_finding}")
    if p.best_so_far:
        parts.append("best so far")
    return "; ".join(parts)


def history_chart(points: Sequence[HistoryPoint], references: dict[str, float]) -> Markup:
    """Median time of each submission (log scale), the best so far as a line, the references
    as dashed lines; every point says its numbers on hover."""
    timed = [p for p in points if p.median_ms]
    title = "Your submissions' times on the timed case (lower is faster), best so far marked"
    if not timed:
        empty = f'<text x="4" y="24" fill="{MUTED}">No timed submission yet.</text>'
        return svg(40, [empty], title)
    left, right, top, bottom, height = 46, 70, 16, 34, 230
    values = [p.median_ms for p in timed if p.median_ms] + [v for v in references.values() if v > 0]
    lo, hi = math.log10(min(values)), math.log10(max(values))
    if hi - lo < 0.2:
        lo, hi = lo - 0.1, hi + 0.1
    margin = 0.08 * (hi - lo)  # no point on the frame, where it would hide a label
    lo, hi = lo - margin, hi + margin
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    count = max(p.number for p in points)
    pad = 12.0

    def x(n: int) -> float:
        inner = plot_w - 2 * pad
        return left + pad + (inner * (n - 1) / (count - 1) if count > 1 else inner / 2)

    def y(ms: float) -> float:
        return top + plot_h * (hi - math.log10(ms)) / (hi - lo)

    body = [
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'stroke="{MUTED}"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="{MUTED}"/>',
    ]
    for ms in (10**hi, 10 ** ((hi + lo) / 2), 10**lo):
        body.append(
            f'<text x="{left - 4}" y="{y(ms) + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#374151">{escape(number(ms))}</text>'
        )
    body.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle" font-size="12" '
        f'fill="#374151">submission (1 = your first); time in ms, log scale</text>'
    )
    for name, ms in sorted(references.items(), key=lambda item: -item[1]):
        if ms <= 0:
            continue
        body.append(
            f'<line x1="{left}" y1="{y(ms):.1f}" x2="{left + plot_w}" y2="{y(ms):.1f}" '
            f'stroke="{MUTED}" stroke-dasharray="4 3"><title>{escape(name)}: '
            f"{escape(number(ms))} ms</title></line>"
            f'<text x="{left + plot_w + 4}" y="{y(ms) + 4:.1f}" font-size="11" '
            f'fill="#374151">{escape(name[:10])}</text>'
        )
    best_path = []
    best: float | None = None
    for p in points:
        if p.median_ms and p.all_passed and (best is None or p.median_ms < best):
            best = p.median_ms
        if best is not None:
            best_path.append(f"{x(p.number):.1f},{y(best):.1f}")
    if len(best_path) > 1:
        body.append(
            f'<polyline points="{" ".join(best_path)}" fill="none" stroke="{HIGHLIGHT}" '
            f'stroke-width="2"/>'
        )
    for p in timed:
        assert p.median_ms is not None
        cx, cy = x(p.number), y(p.median_ms)
        fill = ACCENT if p.all_passed else "#fff"
        ring = ""
        if p.best_so_far:
            ring = (
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" stroke="{HIGHLIGHT}" '
                f'stroke-width="2"/>'
            )
        body.append(
            f'<g class="point" data-submission="{p.submission_id}">{ring}'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{fill}" stroke="{ACCENT}" '
            f'stroke-width="2"><title>{escape(_tooltip(p))}</title></circle></g>'
        )
    return svg(height, body, title)
