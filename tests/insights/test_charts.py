"""The geometry of the insights page's SVG bar charts (insights.charts): the y axis's steps, the
bars' heights in proportion to the numbers, stacked and grouped, and the sentence a screen reader
says for each chart."""

from __future__ import annotations

import pytest

from insights.charts import BOTTOM, HEIGHT, TOP, axis_steps, chart_build
from insights.selectors import Breakdown, Column, Row

PLOT = HEIGHT - TOP - BOTTOM


@pytest.mark.parametrize(
    ("peak", "expected"),
    [
        (0, (1.0, 1)),
        (0.3, (0.1, 3)),
        (1, (1.0, 1)),
        (2, (1.0, 2)),
        (5, (1.0, 5)),
        (6, (2.0, 3)),
        (24, (5.0, 5)),
        (57.7, (20.0, 3)),
        (101, (50.0, 3)),
    ],
)
def test_the_y_axis_counts_in_whole_steps_of_1_2_or_5(peak: float, expected: tuple[float, int]) -> None:
    assert axis_steps(peak) == expected


def _counts() -> Breakdown:
    return Breakdown(
        row_heading="Day",
        unit="escalations",
        columns=(Column("a", "Policy"), Column("b", "Unknown"), Column("n", "Total", charted=False)),
        rows=(Row("d1", "2026-11-02", (1, 3, 4), short="2 Nov"), Row("d2", "2026-11-03", (0, 2, 2))),
    )


def test_a_stacked_chart_piles_the_charted_columns_in_proportion() -> None:
    chart = chart_build(_counts(), key="k", title="Escalations")

    # Peak 4 (1 + 3; the uncharted total is not drawn): four steps of 1.
    assert [t.label for t in chart.ticks] == ["0", "1", "2", "3", "4"]
    heights = [(b.title, round(b.height / PLOT * 4, 6)) for b in chart.bars]
    assert heights == [
        ("2026-11-02 · Policy: 1 escalations", 1.0),
        ("2026-11-02 · Unknown: 3 escalations", 3.0),
        ("2026-11-03 · Unknown: 2 escalations", 2.0),
    ]
    first, second = chart.bars[0], chart.bars[1]
    assert first.y + first.height == pytest.approx(chart.bottom)  # on the axis
    assert second.y + second.height == pytest.approx(first.y)  # on top of the first
    assert [x.label for x in chart.x_labels] == ["2 Nov", "2026-11-03"]
    assert [item.label for item in chart.legend] == ["Policy", "Unknown"]
    assert chart.desc == (
        "Stacked bars of escalations per day, 2 in all (Policy, Unknown). 6 in all; the most, 4, for 2026-11-02."
    )


def test_a_grouped_chart_sets_the_columns_side_by_side_and_skips_missing_values() -> None:
    hours = Breakdown(
        row_heading="Week",
        unit="hours",
        columns=(Column("median", "Median"), Column("p90", "90th percentile")),
        rows=(Row("w1", "week of 2026-11-02", (3.0, 8.2)), Row("w2", "week of 2026-11-09", (None, None))),
        stacking="grouped",
    )
    chart = chart_build(hours, key="k", title="Time to resolve")

    assert [t.label for t in chart.ticks] == ["0", "2", "4", "6", "8", "10"]
    median, p90 = chart.bars
    assert (median.y + median.height, p90.y + p90.height) == (pytest.approx(chart.bottom),) * 2
    assert p90.x == pytest.approx(median.x + median.width)
    assert p90.height / median.height == pytest.approx(8.2 / 3.0)
    assert chart.desc.endswith("The highest median, 3, for week of 2026-11-02.")


def test_an_empty_chart_says_so() -> None:
    empty = Breakdown(row_heading="Tool", unit="calls", columns=(Column("a", "Went unknown"),), rows=())
    chart = chart_build(empty, key="k", title="Unknown outcomes")
    assert chart.empty and chart.bars == ()
    assert chart.desc.endswith("Nothing in this period.")


def test_an_undo_that_failed_is_drawn_in_red_and_one_done_in_green() -> None:
    """Colours that mean something keep their meaning: a failed undo is never the palette's green."""
    from insights.selectors import COMPENSATION_COLUMNS

    breakdown = Breakdown(
        row_heading="Tool undone",
        unit="compensations",
        columns=COMPENSATION_COLUMNS,
        rows=(Row("start_return", "start_return", (1, 0, 2, 0, 0)),),
    )
    chart = chart_build(breakdown, key="compensations", title="Compensations")
    colours = {item.label: item.colour for item in chart.legend}
    assert (colours["Done"], colours["Failed"]) == ("#009e73", "#d55e00")
    assert {bar.colour for bar in chart.bars} == {"#009e73", "#d55e00"}
