"""Charts drawn by the server as inline SVG: no script, no library, readable without JavaScript.

Every label is escaped; colours come from the stylesheet (`currentColor` and CSS classes), so
the charts follow light and dark mode like the rest of the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from markupsafe import Markup, escape


class _Bar(Protocol):
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def count(self) -> int: ...


class _Ranked(Protocol):
    @property
    def model(self) -> str: ...
    @property
    def mean_reward(self) -> float: ...
    @property
    def ci_low(self) -> float: ...
    @property
    def ci_high(self) -> float: ...


def histogram_svg(
    bars: Sequence[_Bar], *, label: str, width: int = 480, height: int = 160
) -> Markup:
    """Vertical bars of counts per bin, with the bin edges along the bottom."""
    if not bars:
        return Markup("")
    top = max(bar.count for bar in bars) or 1
    plot_h = height - 30
    step = width / len(bars)
    parts = [
        (
            f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}" preserveAspectRatio="xMidYMid meet">'
        )
    ]
    for i, bar in enumerate(bars):
        h = plot_h * bar.count / top
        x = i * step + 1
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{plot_h - h:.1f}" width="{step - 2:.1f}" '
            f'height="{h:.1f}"><title>{bar.low:.3g} to {bar.high:.3g}: {bar.count}</title></rect>'
        )
    for value, anchor, x in ((bars[0].low, "start", 0.0), (bars[-1].high, "end", float(width))):
        parts.append(
            f'<text x="{x:.1f}" y="{height - 8}" text-anchor="{anchor}">{value:.3g}</text>'
        )
    parts.append(
        f'<text x="{width / 2:.1f}" y="{height - 8}" text-anchor="middle">{escape(label)}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))  # safe: numbers formatted here, text escaped


def leaderboard_svg(rows: Sequence[_Ranked], *, width: int = 560) -> Markup:
    """Mean reward per model as a dot with its 95% confidence interval, best first."""
    if not rows:
        return Markup("")
    row_h, left, right_pad = 26, 170, 20
    height = row_h * len(rows) + 30
    lows = [min(r.ci_low, r.mean_reward) for r in rows]
    highs = [max(r.ci_high, r.mean_reward) for r in rows]
    lo, hi = min(0.0, *lows), max(1.0, *highs)
    span = (hi - lo) or 1.0
    plot_w = width - left - right_pad

    def x(value: float) -> float:
        return left + plot_w * (value - lo) / span

    parts = [
        (
            f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
            'aria-label="Mean reward by model with 95% confidence intervals">'
        )
    ]
    for i, row in enumerate(rows):
        y = 15 + i * row_h
        name = str(row.model)
        short = name if len(name) <= 24 else name[:23] + "…"
        parts.append(
            f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(short)}'
            f"<title>{escape(name)}</title></text>"
        )
        parts.append(
            f'<line class="ci" x1="{x(row.ci_low):.1f}" x2="{x(row.ci_high):.1f}" '
            f'y1="{y}" y2="{y}"/>'
        )
        parts.append(
            f'<circle class="dot" cx="{x(row.mean_reward):.1f}" cy="{y}" r="4">'
            f"<title>{escape(name)}: {row.mean_reward:.3f} "
            f"[{row.ci_low:.3f}, {row.ci_high:.3f}]</title></circle>"
        )
    axis_y = height - 10
    for value in (lo, (lo + hi) / 2, hi):
        parts.append(
            f'<text x="{x(value):.1f}" y="{axis_y}" text-anchor="middle">{value:.2g}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # safe: numbers formatted here, model names escaped
