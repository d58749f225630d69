"""Charts of the benchmarks' figures as SVG, with no dependency: axes, labels, a legend, lines
with each point's min–max range, and grouped bars.

Each chart draws its own background and switches it with its colours by
``prefers-color-scheme``, so it reads on a light page and on a dark one alike (an SVG shown by
``<img>`` cannot take the page's colours). Each series is a ``<g class="series">`` with a
``data-name``, each point a ``data-value``: what the tests read.

``python -m bench.charts`` renders the charts, ``docs/performance.md`` and ``bench/RESULTS.md``
again from ``bench/results.json``, without running a benchmark (bench/publish.py).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 48, 112  # margins: axis labels left and below, title above
PALETTE = 4  # series colours s0..s3, then again with dashes
STYLE = """
.bg { fill: #ffffff; stroke: #d0d7de; }
.fg { fill: #1f2328; }
.muted { fill: #59636e; }
.grid { stroke: #d8dee4; }
.axis { stroke: #59636e; }
.ink { stroke: #1f2328; }
.s0 { stroke: #0969da; fill: #0969da; }
.s1 { stroke: #bc4c00; fill: #bc4c00; }
.s2 { stroke: #1a7f37; fill: #1a7f37; }
.s3 { stroke: #8250df; fill: #8250df; }
@media (prefers-color-scheme: dark) {
  .bg { fill: #0d1117; stroke: #3d444d; }
  .fg { fill: #e6edf3; }
  .muted { fill: #9198a1; }
  .grid { stroke: #262c36; }
  .axis { stroke: #9198a1; }
  .ink { stroke: #e6edf3; }
  .s0 { stroke: #4493f8; fill: #4493f8; }
  .s1 { stroke: #f0883e; fill: #f0883e; }
  .s2 { stroke: #3fb950; fill: #3fb950; }
  .s3 { stroke: #ab7df8; fill: #ab7df8; }
}
text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 13px; }
.title { font-size: 15px; font-weight: 600; }
"""


@dataclass(frozen=True)
class Point:
    x: float
    value: float  # the median
    low: float  # the range over the runs
    high: float


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    colour: int = 0  # which of the palette's colours
    dashed: bool = False


@dataclass(frozen=True)
class Axes:
    title: str
    x_label: str
    y_label: str


@dataclass(frozen=True)
class Key:
    """An entry of the legend: a colour of the palette (``None``: the text's own, for a line
    style alone), solid or dashed."""

    name: str
    colour: int | None
    dashed: bool = False


def nice_ticks(top: float, count: int = 6) -> list[float]:
    """Ticks from 0 to at least ``top``, at most ``count`` steps of 1, 2, 2.5 or 5 times a
    power of ten."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [round(i * step, 12) for i in range(math.ceil(top / step - 1e-9) + 1)]


def label(value: float) -> str:
    """A tick's text: no trailing zeros, thousands separated."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.3g}"


def _frame(axes: Axes, body: list[str], legend: Sequence[Key]) -> str:
    """The whole SVG: background, title, axis labels, ``body`` and the legend below."""
    plot_bottom = HEIGHT - BOTTOM
    middle = TOP + (plot_bottom - TOP) / 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label={quoteattr(axes.title)}>',
        f"<title>{escape(axes.title)}</title>",
        f"<style>{STYLE}</style>",
        f'<rect class="bg" x="0.5" y="0.5" width="{WIDTH - 1}" height="{HEIGHT - 1}" rx="6"/>',
        f'<text class="fg title" x="{LEFT}" y="28">{escape(axes.title)}</text>',
        f'<text class="muted" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{plot_bottom + 40}" '
        f'text-anchor="middle">{escape(axes.x_label)}</text>',
        f'<text class="muted" x="18" y="{middle}" text-anchor="middle" '
        f'transform="rotate(-90 18 {middle})">{escape(axes.y_label)}</text>',
        *body,
    ]
    x, y = float(LEFT), plot_bottom + 66.0
    for key in legend:
        name = key.name
        width = 40 + 7.2 * len(name)
        if x + width > WIDTH - RIGHT and x > LEFT:  # the next row
            x, y = float(LEFT), y + 20
        css = "ink" if key.colour is None else f"s{key.colour % PALETTE}"
        dash = ' stroke-dasharray="6 4"' if key.dashed else ""
        parts.append(
            f'<line class="{css}" x1="{x:.1f}" y1="{y - 4}" x2="{x + 24:.1f}" y2="{y - 4}" '
            f'stroke-width="2.5"{dash}/>'
        )
        parts.append(f'<text class="fg" x="{x + 30:.1f}" y="{y}">{escape(name)}</text>')
        x += width + 8
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _y_axis(ticks: list[float]) -> tuple[list[str], float]:
    """Grid lines and labels of the value axis, and the value at its top."""
    top = ticks[-1] or 1.0
    parts = []
    for tick in ticks:
        y = _y(tick, top)
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text class="muted" x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"{label(tick)}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
        f'y2="{HEIGHT - BOTTOM}"/>'
    )
    return parts, top


def _y(value: float, top: float) -> float:
    return HEIGHT - BOTTOM - value / top * (HEIGHT - BOTTOM - TOP)


def line_chart(
    axes: Axes,
    series: Sequence[Series],
    reference: tuple[float, str] | None = None,
    legend: Sequence[Key] | None = None,
) -> str:
    """One line per series over a linear x axis with a tick at every x of the data; each
    point's min–max range is a thin vertical bar. ``reference``: a horizontal line (a goal)
    at that value, with its label. ``legend``: its entries, if not one per series."""
    xs = sorted({p.x for s in series for p in s.points})
    highest = max((p.high for s in series for p in s.points), default=0.0)
    if reference is not None:
        highest = max(highest, reference[0] * 1.1)
    grid, top = _y_axis(nice_ticks(highest * 1.05))  # headroom for the labels over the top
    first, last = (xs[0], xs[-1]) if xs else (0.0, 1.0)
    span = (last - first) or 1.0
    inner = WIDTH - LEFT - RIGHT - 24  # a margin inside the plot at both ends

    def x_at(x: float) -> float:
        return LEFT + 12 + (x - first) / span * inner

    body = list(grid)
    if reference is not None:
        y = _y(reference[0], top)
        body.append(
            f'<g class="reference"><line class="ink" x1="{LEFT}" y1="{y:.1f}" '
            f'x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke-dasharray="2 3"/>'
            f'<text class="fg" x="{WIDTH - RIGHT - 4}" y="{y - 6:.1f}" text-anchor="end">'
            f"{escape(reference[1])}</text></g>"
        )
    for x in xs:
        body.append(
            f'<text class="muted" x="{x_at(x):.1f}" y="{HEIGHT - BOTTOM + 18}" '
            f'text-anchor="middle">{label(x)}</text>'
        )
    for k, s in enumerate(series):
        css = f"s{s.colour % PALETTE}"
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        points = " ".join(f"{x_at(p.x):.1f},{_y(p.value, top):.1f}" for p in s.points)
        body.append(f'<g class="series" data-name={quoteattr(s.name)}>')
        # A class's fill would override a fill attribute: the style keeps the line unfilled.
        body.append(
            f'<polyline class="{css}" style="fill: none" stroke-width="2.5"{dash} '
            f'points="{points}"/>'
        )
        shift = (k - (len(series) - 1) / 2) * 2.5  # ranges at one x side by side
        for p in s.points:
            cx = x_at(p.x)
            body.append(
                f'<line class="{css}" x1="{cx + shift:.1f}" y1="{_y(p.low, top):.1f}" '
                f'x2="{cx + shift:.1f}" y2="{_y(p.high, top):.1f}" stroke-width="1"/>'
            )
            body.append(
                f'<circle class="{css}" cx="{cx:.1f}" cy="{_y(p.value, top):.1f}" r="3.5" '
                f'data-x="{p.x:g}" data-value="{p.value:g}"/>'
            )
        body.append("</g>")
    if legend is None:
        legend = [Key(s.name, s.colour, s.dashed) for s in series]
    return _frame(axes, body, legend)


def bar_chart(axes: Axes, groups: Sequence[str], series: Sequence[Series]) -> str:
    """Bars grouped by ``groups``: series ``s``'s point ``i`` is its bar in group ``i`` (its
    ``x`` is ignored); each bar's min–max range is a thin line over it."""
    highest = max((p.high for s in series for p in s.points), default=0.0)
    grid, top = _y_axis(nice_ticks(highest * 1.05))  # headroom for the labels over the top
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(groups))
    bar = min(56.0, slot * 0.7 / max(1, len(series)))
    body = list(grid)
    for i, group in enumerate(groups):
        centre = LEFT + slot * (i + 0.5)
        body.append(
            f'<text class="muted" x="{centre:.1f}" y="{HEIGHT - BOTTOM + 18}" '
            f'text-anchor="middle">{escape(group)}</text>'
        )
    for k, s in enumerate(series):
        css = f"s{s.colour % PALETTE}"
        body.append(f'<g class="series" data-name={quoteattr(s.name)}>')
        for i, p in enumerate(s.points[: len(groups)]):
            left = LEFT + slot * (i + 0.5) - bar * len(series) / 2 + bar * k
            y = _y(p.value, top)
            body.append(
                f'<rect class="{css}" x="{left + 2:.1f}" y="{y:.1f}" width="{bar - 4:.1f}" '
                f'height="{HEIGHT - BOTTOM - y:.1f}" fill-opacity="0.85" '
                f'data-value="{p.value:g}"/>'
            )
            middle = left + bar / 2
            body.append(
                f'<line class="ink" x1="{middle:.1f}" '
                f'y1="{_y(p.low, top):.1f}" x2="{middle:.1f}" y2="{_y(p.high, top):.1f}" '
                f'stroke-width="1"/>'
            )
            body.append(
                f'<text class="fg" x="{middle:.1f}" y="{_y(p.high, top) - 6:.1f}" '
                f'text-anchor="middle">{label(round(p.value, 3))}</text>'
            )
        body.append("</g>")
    return _frame(axes, body, [Key(s.name, s.colour) for s in series])


def main() -> None:
    from bench import publish  # publish draws with this module: imported when run, not before

    parser = argparse.ArgumentParser(
        description="Render the charts, docs/performance.md and bench/RESULTS.md again from "
        "bench/results.json, without running a benchmark."
    )
    publish.add_path_arguments(parser)
    args = parser.parse_args()
    paths = publish.paths_from(args)
    publish.render(paths)
    print(f"rendered from {paths.json}: {paths.results}, {paths.page} and {paths.charts}/")


if __name__ == "__main__":
    main()
