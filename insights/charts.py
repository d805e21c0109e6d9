"""Bar charts drawn on the server as SVG (templates/handover/_chart.html), from the same Breakdown
as the table beside them: no JavaScript, no library, prints as it shows. This module only does
the geometry (where each bar, tick and label goes, in the SVG's own coordinates); the template
writes the elements, escaping every label.

A stacked chart piles a row's charted columns into one bar (counts of kinds that add up); a
grouped chart sets them side by side (a median beside a 90th percentile)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .selectors import Breakdown

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 40
PLOT_WIDTH = WIDTH - LEFT - RIGHT
PLOT_HEIGHT = HEIGHT - TOP - BOTTOM
AXIS = float(HEIGHT - BOTTOM)  # the y of the x axis: bars stand on it
MAX_X_LABELS = 8
MAX_TICKS = 5
MAX_BAR_WIDTH = 120  # one or two bars across the whole chart read as blocks, not bars
LABEL_CHARS = 14
# Okabe and Ito's palette: told apart by people with the common colour-vision deficiencies.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#7f6d00", "#404040")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str  # the bar's tooltip: row, column and value

    # The coordinates as the SVG writes them: text made here, because the template would pass
    # every number through Django's localisation (number_format), most of the page's rendering.
    @property
    def svg_x(self) -> str:
        return f"{self.x:g}"

    @property
    def svg_y(self) -> str:
        return f"{self.y:g}"

    @property
    def svg_width(self) -> str:
        return f"{self.width:g}"

    @property
    def svg_height(self) -> str:
        return f"{self.height:g}"


@dataclass(frozen=True)
class Tick:
    y: float
    label: str

    @property
    def svg_y(self) -> str:
        return f"{self.y:g}"


@dataclass(frozen=True)
class XLabel:
    x: float
    label: str

    @property
    def svg_x(self) -> str:
        return f"{self.x:g}"


@dataclass(frozen=True)
class LegendItem:
    colour: str
    label: str


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    desc: str
    width: int
    height: int
    left: int
    bottom: float  # the y of the x axis
    right: float
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    x_labels: tuple[XLabel, ...]
    legend: tuple[LegendItem, ...]
    empty: bool

    @property
    def tick_x(self) -> int:
        """Where the y axis's labels end (right-aligned, left of the plot)."""
        return self.left - 6

    @property
    def label_y(self) -> float:
        """The baseline of the x axis's labels, under the axis."""
        return self.bottom + 16


def axis_steps(peak: float, *, most: int = MAX_TICKS) -> tuple[float, int]:
    """The y axis's step and number of steps: the smallest of 1, 2, 5 x 10^k (at least 1, as
    counts and hours are read in whole numbers, unless everything is under 1) that reaches the
    peak in at most `most` steps. Nothing to show: one step of 1."""
    if peak <= 0:
        return 1.0, 1
    magnitude = 10 ** math.floor(math.log10(peak / most))
    if peak >= 1:
        magnitude = max(1, magnitude)
    while True:
        for base in (1, 2, 5):
            step = base * magnitude
            if math.ceil(peak / step - 1e-9) <= most:
                return float(step), max(1, math.ceil(peak / step - 1e-9))
        magnitude *= 10


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _bar(x: float, y: float, width: float, height: float, colour: str, title: str) -> Bar:
    return Bar(round(x, 2), round(y, 2), round(width, 2), round(height, 2), colour, title)


def chart_build(breakdown: Breakdown, *, key: str, title: str) -> Chart:
    """The geometry of a breakdown's bar chart, in a WIDTH x HEIGHT view box."""
    stacked = breakdown.stacking == "stacked"
    rows = breakdown.rows
    step, steps = axis_steps(float(_peak(breakdown, stacked=stacked)))
    slot = PLOT_WIDTH / max(len(rows), 1)
    ticks = tuple(
        Tick(round(AXIS - PLOT_HEIGHT * k / steps, 1), _number(round(step * k, 6))) for k in range(steps + 1)
    )
    every = max(1, math.ceil(len(rows) / MAX_X_LABELS))
    x_labels = tuple(
        XLabel(round(LEFT + n * slot + slot / 2, 1), row.short or _short(row.label))
        for n, row in enumerate(rows)
        if n % every == 0
    )
    return Chart(
        key=key,
        title=title,
        desc=_describe(breakdown, stacked=stacked),
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        bottom=AXIS,
        right=float(WIDTH - RIGHT),
        bars=_bars(breakdown, stacked=stacked, top=step * steps, slot=slot),
        ticks=ticks,
        x_labels=x_labels,
        legend=_legend(breakdown),
        empty=breakdown.is_empty,
    )


def _peak(breakdown: Breakdown, *, stacked: bool) -> float:
    """The tallest bar: a row's charted columns summed when stacked, else the largest one."""
    charted, rows = breakdown.charted_columns, breakdown.rows
    if stacked:
        return max((sum(row.values[i] or 0 for i in charted) for row in rows), default=0)
    return max((row.values[i] or 0 for row in rows for i in charted), default=0)


def _colour(breakdown: Breakdown, i: int, position: int) -> str:
    """A column's own colour, else the palette's by its place among the charted columns."""
    return breakdown.columns[i].colour or PALETTE[position % len(PALETTE)]


def _bars(breakdown: Breakdown, *, stacked: bool, top: float, slot: float) -> tuple[Bar, ...]:
    """One bar per non-empty value: stacked on the row's earlier ones, or side by side in its slot."""
    charted = breakdown.charted_columns
    bar_width = min(slot * 0.8, MAX_BAR_WIDTH)
    bars: list[Bar] = []
    for n, row in enumerate(breakdown.rows):
        x0 = LEFT + n * slot + (slot - bar_width) / 2
        base = AXIS
        for position, i in enumerate(charted):
            value = row.values[i]
            if not value:
                continue
            column = breakdown.columns[i]
            height = value / top * PLOT_HEIGHT
            colour = _colour(breakdown, i, position)
            tooltip = f"{row.label} · {column.label}: {_number(value)} {breakdown.unit}"
            if stacked:
                base -= height
                bars.append(_bar(x0, base, bar_width, height, colour, tooltip))
            else:
                width = bar_width / len(charted)
                bars.append(_bar(x0 + position * width, AXIS - height, width, height, colour, tooltip))
    return tuple(bars)


def _legend(breakdown: Breakdown) -> tuple[LegendItem, ...]:
    return tuple(
        LegendItem(_colour(breakdown, i, position), breakdown.columns[i].label)
        for position, i in enumerate(breakdown.charted_columns)
    )


def _describe(breakdown: Breakdown, *, stacked: bool) -> str:
    """What the chart shows, in a sentence a screen reader can say (the table has the numbers)."""
    charted = breakdown.charted_columns
    columns = ", ".join(breakdown.columns[i].label for i in charted)
    what = (
        f"{'Stacked' if stacked else 'Grouped'} bars of {breakdown.unit} per "
        f"{breakdown.row_heading.lower()}, {len(breakdown.rows)} in all ({columns})."
    )
    if breakdown.is_empty:
        return what + " Nothing in this period."
    if stacked:
        total = sum(row.values[i] or 0 for row in breakdown.rows for i in charted)
        busiest = max(breakdown.rows, key=lambda row: sum(row.values[i] or 0 for i in charted))
        most = sum(busiest.values[i] or 0 for i in charted)
        return what + f" {_number(total)} in all; the most, {_number(most)}, for {busiest.label}."
    first = charted[0]
    highest = max(breakdown.rows, key=lambda row: row.values[first] or 0)
    return what + (
        f" The highest {breakdown.columns[first].label.lower()}, "
        f"{_number(highest.values[first] or 0)}, for {highest.label}."
    )
