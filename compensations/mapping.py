"""Building a compensating tool's arguments from the original step's arguments and receipt, by
the catalogue entry's `argument_mapping` (the language is described on CatalogueEntry)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Protocol

Origin = Literal["args", "receipt"]
NEGATE = "negate:"


class MappingError(ValueError):
    """The mapping cannot be resolved: a malformed source, or a source that is missing."""


class MissingSource(MappingError):
    """A source the mapping names is not in the original step's arguments or receipt.
    `source` is the mapping's text for it (e.g. `receipt.reservation_id`)."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True)
class Source:
    origin: Origin
    field: str
    negate: bool = False


class HasMapping(Protocol):
    @property
    def tool(self) -> str: ...

    @property
    def compensating_tool(self) -> str: ...

    @property
    def argument_mapping(self) -> Any: ...


def parse_source(source: object) -> Source:
    """Parse "args.x", "receipt.x", "negate:args.x" or "negate:receipt.x"."""
    if not isinstance(source, str):
        raise MappingError(f"a mapping source must be a string, not {source!r}")
    text = source
    negate = text.startswith(NEGATE)
    if negate:
        text = text[len(NEGATE) :]
    origin, dot, field = text.partition(".")
    if origin not in ("args", "receipt") or not dot or not field or "." in field:
        raise MappingError(
            f"unknown mapping source {source!r}: expected args.<name>, receipt.<name>, or negate:args.<name>"
        )
    return Source(origin="args" if origin == "args" else "receipt", field=field, negate=negate)


def _negated(value: Any, source: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise MappingError(f"{source} is {value!r}, which cannot be negated")
    if isinstance(value, str):
        try:
            number = Decimal(value)
        except ArithmeticError:
            raise MappingError(f"{source} is {value!r}, which cannot be negated") from None
        return str(-number)
    return -value


def compensation_args(
    entry: HasMapping, args: Mapping[str, Any], receipt: Mapping[str, Any]
) -> dict[str, Any]:
    """The compensating tool's arguments for one performed step of `entry.tool`. Raises
    MissingSource naming the source when the step's arguments or receipt lack it."""
    mapping = entry.argument_mapping
    if not isinstance(mapping, Mapping):
        raise MappingError(f"{entry.tool}: argument_mapping must be an object, not {mapping!r}")
    origins: dict[Origin, Mapping[str, Any]] = {"args": args or {}, "receipt": receipt or {}}
    resolved: dict[str, Any] = {}
    for name, text in mapping.items():
        source = parse_source(text)
        values = origins[source.origin]
        if source.field not in values:
            raise MissingSource(
                f"{entry.compensating_tool or 'the undo'} of {entry.tool} needs {name} from {text}, "
                f"but the step's {'arguments have' if source.origin == 'args' else 'receipt has'} "
                f"no {source.field}",
                source=str(text),
            )
        value = values[source.field]
        resolved[name] = _negated(value, str(text)) if source.negate else value
    return resolved
