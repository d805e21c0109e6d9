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


@dataclass(frozen=True)
class ParsedMapping:
    """An entry's argument_mapping parsed once, for building the undo of many steps of its tool:
    each of the compensating tool's argument names with its source's text and parsed source."""

    tool: str
    compensating_tool: str
    sources: tuple[tuple[str, str, Source], ...]

    @classmethod
    def of(cls, entry: HasMapping) -> ParsedMapping:
        """Raises MappingError when the mapping is not an object or names a malformed source."""
        mapping = entry.argument_mapping
        if not isinstance(mapping, Mapping):
            raise MappingError(f"{entry.tool}: argument_mapping must be an object, not {mapping!r}")
        return cls(
            tool=entry.tool,
            compensating_tool=entry.compensating_tool,
            sources=tuple((str(name), str(text), parse_source(text)) for name, text in mapping.items()),
        )

    def build(self, args: Mapping[str, Any], receipt: Mapping[str, Any]) -> dict[str, Any]:
        """The compensating tool's arguments for one performed step (compensation_args)."""
        origins: dict[Origin, Mapping[str, Any]] = {"args": args or {}, "receipt": receipt or {}}
        resolved: dict[str, Any] = {}
        for name, text, source in self.sources:
            values = origins[source.origin]
            if source.field not in values:
                raise MissingSource(
                    f"{self.compensating_tool or 'the undo'} of {self.tool} needs {name} from {text}, "
                    f"but the step's {'arguments have' if source.origin == 'args' else 'receipt has'} "
                    f"no {source.field}",
                    source=text,
                )
            value = values[source.field]
            resolved[name] = _negated(value, text) if source.negate else value
        return resolved

    def builds(self, args: Mapping[str, Any], receipt: Mapping[str, Any]) -> bool:
        """Whether build succeeds for this step, without making the error's words when a source
        is missing: the run page asks this of every one of a long run's steps, and nearly all
        that fail lack a source. Once every source is there, build itself decides (negation)."""
        origins: dict[Origin, Mapping[str, Any]] = {"args": args or {}, "receipt": receipt or {}}
        if any(source.field not in origins[source.origin] for _name, _text, source in self.sources):
            return False
        try:
            self.build(args, receipt)
        except MappingError:
            return False
        return True


def compensation_args(
    entry: HasMapping, args: Mapping[str, Any], receipt: Mapping[str, Any]
) -> dict[str, Any]:
    """The compensating tool's arguments for one performed step of `entry.tool`. Raises
    MissingSource naming the source when the step's arguments or receipt lack it, MappingError
    when the mapping itself is malformed or a value cannot be negated."""
    return ParsedMapping.of(entry).build(args, receipt)
