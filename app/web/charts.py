"""Small SVG charts drawn on the server: no script, nothing fetched from elsewhere.

Each returns markup sized by its viewBox, so it scales to the width of its box (a phone's too);
every text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH = 440
FONT = 13
ACCENT = "#2563eb"
MUTED = "#9aa1ad"
HIGHLIGHT = "#e8590c"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str  # the value as shown beside the bar
    highlight: bool = False


def svg(height: int, body: list[str], title: str) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
        f'font-family="system-ui, sans-serif" font-size="{FONT}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def bar_chart(bars: Sequence[Bar], *, title: str) -> Markup:
    """Horizontal bars, one per row, lengths proportional to the values (0 at the left)."""
    label_w, text_w, row_h = 120, 92, 26
    top = max((b.value for b in bars), default=0.0) or 1.0
    span = WIDTH - label_w - text_w
    body = []
    for i, bar in enumerate(bars):
        y = i * row_h + 4
        w = max(1.0, span * bar.value / top)
        fill = HIGHLIGHT if bar.highlight else ACCENT
        weight = ' font-weight="600"' if bar.highlight else ""
        body.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end"{weight}>'
            f"{escape(bar.label)}</text>"
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="18" rx="2" fill="{fill}"/>'
            f'<text x="{label_w + w + 5:.1f}" y="{y + 13}"{weight}>{escape(bar.text)}</text>'
        )
    return svg(len(bars) * row_h + 6, body, title)


def meters(rows: Sequence[tuple[str, float, str]], *, title: str) -> Markup:
    """Bars against a full scale: (label, fraction of the maximum, text), the text above its
    bar. A fraction above 1 is drawn full, in the highlight colour."""
    label_w, row_h = 92, 44
    span = WIDTH - label_w - 4
    body = []
    for i, (label, fraction, text) in enumerate(rows):
        y = i * row_h + 4
        w = span * min(max(fraction, 0.0), 1.0)
        fill = HIGHLIGHT if fraction > 1 else ACCENT
        body.append(
            f'<text x="{label_w - 6}" y="{y + 31}" text-anchor="end">{escape(label)}</text>'
            f'<text x="{label_w}" y="{y + 13}">{escape(text)}</text>'
            f'<rect x="{label_w}" y="{y + 18}" width="{span}" height="18" rx="2" fill="#e5e8ec"/>'
            f'<rect x="{label_w}" y="{y + 18}" width="{max(w, 1.5):.1f}" height="18" rx="2" '
            f'fill="{fill}"/>'
        )
    return svg(len(rows) * row_h + 4, body, title)


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    count: int
    label: str


def linear_bins(values: Sequence[float], *, low: float, high: float, count: int) -> list[Bin]:
    """`count` equal bins from low to high; the last one includes `high`."""
    width = (high - low) / count if high > low else 1.0
    bins = [
        Bin(low + i * width, low + (i + 1) * width, 0, f"{low + i * width:g}") for i in range(count)
    ]
    counts = [0] * count
    for v in values:
        index = min(count - 1, max(0, int((v - low) / width)))
        counts[index] += 1
    return [Bin(b.low, b.high, n, b.label) for b, n in zip(bins, counts, strict=True)]


def log_bins(values: Sequence[float], *, per_decade: int = 4) -> list[Bin]:
    """Bins equal on a log scale covering the values (times spread over decades)."""
    positive = [v for v in values if v > 0]
    if not positive:
        return []
    lo = math.floor(math.log10(min(positive)) * per_decade)
    hi = math.floor(math.log10(max(positive)) * per_decade) + 1
    bins = []
    for k in range(lo, hi):
        low, high = 10 ** (k / per_decade), 10 ** ((k + 1) / per_decade)
        n = sum(1 for v in positive if low <= v < high)
        bins.append(Bin(low, high, n, _short(low)))
    return bins


def _short(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def histogram(
    bins: Sequence[Bin], *, title: str, x_label: str, marker: float | None = None
) -> Markup:
    """Vertical bars with their counts above them; `marker` draws a line at one value (this
    submission, say) over the bin it falls in."""
    left, bottom, top_pad, height = 28, 36, 30, 182
    if not bins:
        return svg(40, [f'<text x="4" y="24" fill="{MUTED}">No data yet.</text>'], title)
    plot_w = WIDTH - left - 6
    plot_h = height - bottom - top_pad
    most = max(b.count for b in bins) or 1
    step = plot_w / len(bins)
    body = [
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{WIDTH - 6}" y2="{top_pad + plot_h}" '
        f'stroke="{MUTED}"/>'
    ]
    every = max(1, math.ceil(len(bins) / 6))
    for i, b in enumerate(bins):
        x = left + i * step
        h = plot_h * b.count / most
        if b.count:
            body.append(
                f'<rect x="{x + 1:.1f}" y="{top_pad + plot_h - h:.1f}" width="{step - 2:.1f}" '
                f'height="{h:.1f}" fill="{ACCENT}"><title>{b.count} in {escape(_short(b.low))}'
                f"–{escape(_short(b.high))}</title></rect>"
                f'<text x="{x + step / 2:.1f}" y="{top_pad + plot_h - h - 3:.1f}" '
                f'text-anchor="middle" font-size="11">{b.count}</text>'
            )
        if i % every == 0:
            body.append(
                f'<text x="{x:.1f}" y="{top_pad + plot_h + 15}" font-size="11" '
                f'fill="#374151">{escape(b.label)}</text>'
            )
    body.append(
        f'<text x="{WIDTH - 6}" y="{top_pad + plot_h + 15}" font-size="11" '
        f'text-anchor="end" fill="#374151">{escape(_short(bins[-1].high))}</text>'
    )
    body.append(
        f'<text x="{WIDTH / 2:.0f}" y="{height - 4}" text-anchor="middle" font-size="12" '
        f'fill="#374151">{escape(x_label)}</text>'
    )
    if marker is not None:
        for i, b in enumerate(bins):
            last = i == len(bins) - 1
            if (
                b.low <= marker < b.high
                or (last and marker >= b.high)
                or (i == 0 and marker < b.low)
            ):
                # Where in its bin: log-spaced bins (times) interpolate on a log scale.
                if b.low > 0 and marker > 0:
                    frac = math.log(marker / b.low) / math.log(b.high / b.low)
                else:
                    frac = (marker - b.low) / ((b.high - b.low) or 1.0)
                x = left + (i + min(max(frac, 0.05), 0.95)) * step
                body.append(
                    f'<line x1="{x:.1f}" y1="{top_pad - 4}" x2="{x:.1f}" y2="{top_pad + plot_h}" '
                    f'stroke="{HIGHLIGHT}" stroke-width="3"/>'
                    f'<text x="{min(x, WIDTH - 40):.1f}" y="{top_pad - 10}" text-anchor="middle" '
                    f'font-size="12" font-weight="600" fill="{HIGHLIGHT}">yours</text>'
                )
                break
    return svg(height, body, title)
