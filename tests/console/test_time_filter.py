"""The `elapsed` filter of the queue and run lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.template import Context, Template

from console.templatetags.seam_time import elapsed

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def test_under_a_minute_is_said_so_rather_than_zero_minutes() -> None:
    assert elapsed(NOW - timedelta(seconds=59), NOW) == "under a minute"
    assert elapsed(NOW, NOW) == "under a minute"


def test_longer_spans_read_as_django_says_them() -> None:
    assert elapsed(NOW - timedelta(minutes=1), NOW) == "1\xa0minute"
    assert elapsed(NOW - timedelta(hours=2, minutes=5), NOW) == "2\xa0hours, 5\xa0minutes"


def test_no_time_is_never() -> None:
    assert elapsed(None, NOW) == "never"


def test_the_filter_is_loaded_by_name_in_templates() -> None:
    rendered = Template("{% load seam_time %}{{ at|elapsed }}").render(Context({"at": None}))
    assert rendered == "never"
