"""Dates typed as the person's locale writes them. The filters' date fields (the audit page,
insights) are text inputs, not `<input type="date">`: a date picker shows mm/dd/yyyy or
dd/mm/yyyy by the browser's settings, whatever the page says, and its value cannot be read back
in the order the person typed. Here the order comes from the request's language (its
`django_language` cookie, else its Accept-Language, else settings.LANGUAGE_CODE, as Django's
get_language_from_request chooses) and from Django's own locale formats for that language: the
field shows that order as its placeholder and its value, and accepts it and ISO 8601
(yyyy-mm-dd), which is what links and the CSV export's queries carry.

Django's `en` locale stands for American English too and lists ISO first, so `en` (an `en-US`
browser) uses its first written order, mm/dd/yyyy; a locale whose formats module sets no
DATE_INPUT_FORMATS (`ja`) writes ISO."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from django import forms
from django.http import HttpRequest
from django.utils import formats
from django.utils.translation import get_language_from_request

ISO = "%Y-%m-%d"
# How a strftime directive reads in a placeholder.
PLACEHOLDER_PARTS = {"%d": "dd", "%m": "mm", "%Y": "yyyy"}


@dataclass(frozen=True)
class DateInput:
    """How one person writes a date: `format` a strftime pattern, `language` what chose it."""

    format: str = ISO
    language: str = ""

    @property
    def placeholder(self) -> str:
        """The order as a person reads it: "dd/mm/yyyy"."""
        text = self.format
        for directive, words in PLACEHOLDER_PARTS.items():
            text = text.replace(directive, words)
        return text

    @property
    def input_formats(self) -> list[str]:
        """What the field accepts: the locale's order, then ISO."""
        return [self.format] if self.format == ISO else [self.format, ISO]

    def show(self, value: date | None) -> str:
        return value.strftime(self.format) if value else ""


def _written_order(formats_list: list[str]) -> str:
    """The first pattern with a day, a month and a four-digit year, ISO when none has them."""
    return next((f for f in formats_list if all(d in f for d in PLACEHOLDER_PARTS)), ISO)


def date_input_for_language(language: str) -> DateInput:
    """The date order of a language code ("en-us", "de", "en-gb")."""
    modules = formats.get_format_modules(language)
    if not any(hasattr(module, "DATE_INPUT_FORMATS") for module in modules):
        return DateInput(ISO, language)
    written = list(formats.get_format("DATE_INPUT_FORMATS", lang=language))
    if language in ("en", "en-us") and written and written[0] == ISO:
        written = written[1:]  # the `en` locale's ISO first is the default for all, not the US order
    return DateInput(_written_order(written), language)


def date_input_for(request: HttpRequest) -> DateInput:
    """The date order of the person making the request."""
    return date_input_for_language(get_language_from_request(request))


class LocaleDateField(forms.DateField):
    """A filter's date, typed in the person's order or as ISO; set `date_input` (LocaleDateForm)
    before the form is cleaned. A refusal names the order expected."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        self.parameter = name
        super().__init__(required=False, input_formats=[ISO], **kwargs)
        self.use(DateInput())

    def use(self, date_input: DateInput) -> None:
        self.input_formats = date_input.input_formats
        self.error_messages["invalid"] = (
            f"{self.parameter} must be a real date, as {date_input.placeholder}"
            + ("" if date_input.format == ISO else " or yyyy-mm-dd")
        )


class LocaleDateForm(forms.Form):
    """A form whose LocaleDateFields read dates in `date_input`'s order (and ISO)."""

    def __init__(self, *args: Any, date_input: DateInput | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.date_input = date_input or DateInput()
        for field in self.fields.values():
            if isinstance(field, LocaleDateField):
                field.use(self.date_input)
