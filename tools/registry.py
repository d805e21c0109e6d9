"""The tool registry: every tool Seam can call or ask about, with its kind (read or write), its
connector, the JSON Schema its arguments must satisfy, and the receipt fields a success carries.
Bad arguments are refused here, before any intent is recorded.

Tools are declared by installed apps: each app's `seam.py` may define `tools() -> list[ToolSpec]`
(tools.discovery). A connector can also be named by dotted path (`connector_path`) and is then
built from `connector_options`."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import jsonschema
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from journal.channels import CustomerChannel
from journal.in_flight import InFlightFloor
from journal.tool_errors import ArgumentsRefused

from . import discovery
from .connectors import Connector, TimedConnector

ToolKind = Literal["read", "write"]


class UnknownTool(LookupError):
    pass


@dataclass(frozen=True)
class CustomerFacing:
    """A tool whose performed call reaches the customer: the handover lists each such call under
    "customer told", whichever path sent it (the agent's run, a resumption, a person).

    channel    how the customer received it
    says       what they were told, in words: placeholders name the call's arguments or its
               receipt's fields, e.g. "email {template} ({message_id})"; blank lists the arguments
    announces  the tools whose effects this message reports to the customer (a credit note
               announces `issue_credit`): the call reports each earlier performed step of those
               tools in its run, so an undone one flags the message. Leave it empty when the
               tool's message need not report any step (a generic template): no link is assumed.
    """

    channel: CustomerChannel
    says: str = ""
    announces: tuple[str, ...] = ()

    def describe(self, args: Mapping[str, Any], receipt: Mapping[str, Any]) -> str:
        if self.says:
            try:
                return self.says.format_map({**dict(args), **dict(receipt)})
            except (KeyError, IndexError, ValueError):
                pass  # a call without a field the template names: fall back to its arguments
        return ", ".join(f"{name} {value}" for name, value in args.items())


# Lookups in flight at once per downstream, per worker process, unless a tool declares otherwise.
DEFAULT_LOOKUP_CONCURRENCY = 8


def tool_title_from_name(name: str) -> str:
    """A tool's registered name as a label, for a tool that declares none: `cancel_pickup` as
    "Cancel pickup" (underscores, dashes and dots as spaces, the first letter capitalised)."""
    words = " ".join(name.replace("_", " ").replace("-", " ").replace(".", " ").split())
    return words[:1].upper() + words[1:] if words else name


def tool_title(name: str) -> str:
    """The title of the tool registered under `name` (ToolSpec.title), or, for a tool no app
    declares, its name made readable."""
    spec = find_tool(name) if name else None
    return spec.title() if spec is not None else tool_title_from_name(name)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    kind: ToolKind
    args_schema: Mapping[str, Any]
    connector: Connector | None = None
    connector_path: str = ""
    connector_options: Mapping[str, Any] = field(default_factory=dict)
    receipt_fields: tuple[str, ...] = ()
    description: str = ""
    # A person's words for the call, as the console's buttons, lists and sentences name it:
    # "Cancel the pickup" for `cancel_pickup`. Blank: the name made readable ("Cancel pickup").
    # The API's machine fields keep the name; only prose uses the label.
    label: str = ""
    # How a person reads a receipt of this tool in the handover, e.g. "label {label}, courier
    # pickup booked {pickup_date}". Placeholders name receipt fields; blank lists them all.
    receipt_detail: str = ""
    # Set when a performed call of this tool reaches the customer (an email, a text): what the
    # customer was told then appears under the handover's "customer told".
    customer_facing: CustomerFacing | None = None

    # How a receipt of this tool says the call could not do all it was asked, e.g. an undo the
    # provider carried out only at a cost: "recalled at a fee of {recall_fee} {currency}". The
    # sentence counts only when the receipt has every field it names; blank: its receipts never
    # say so. The engine reads it (describe_loss) without knowing the provider's fields.
    loss_detail: str = ""

    def title(self) -> str:
        """The tool as people name it: its label, or its name made readable (tool_title)."""
        return self.label.strip() or tool_title_from_name(self.name)

    def describe_loss(self, receipt: Mapping[str, Any]) -> str:
        """What this receipt says was lost ('' when nothing was, or the tool cannot say)."""
        if not self.loss_detail:
            return ""
        try:
            return self.loss_detail.format_map(dict(receipt))
        except (KeyError, IndexError, ValueError):
            return ""  # a field the sentence names is absent: the receipt reports no loss

    # The downstream deduplicates calls by their idempotency key, for key_lifetime seconds from
    # the call: sending a call again with the same key inside that window returns the first
    # call's result and never acts twice. Reconciliation then settles a call no lookup could
    # by sending it again under its key (tools.services.intent_resend_under_key); past the
    # window, never. False: the key is not honoured, and a call in doubt is only ever asked about.
    honours_key: bool = False
    key_lifetime: float = 86400.0

    # What reconciliation may ask of the downstream at once (reconciliation.lookups): tools
    # sharing a `downstream` name share its bound (blank: the tool is its own), at most
    # `lookup_concurrency` lookups in flight and `lookup_rate` started a second (0: no limit),
    # per worker process.
    downstream: str = ""
    lookup_concurrency: int = DEFAULT_LOOKUP_CONCURRENCY
    lookup_rate: float = 0.0

    def may_resend(self, *, intended_at: datetime, now: datetime) -> bool:
        """Whether a call of this tool recorded at `intended_at` may be sent again under its key
        at `now`: the tool honours its key, and the provider still keeps it."""
        return self.honours_key and now - intended_at < timedelta(seconds=self.key_lifetime)

    # How long after a call its receipt's deadline can lie, as the provider documents it (a
    # shipment's recall cutoff two hours after it is booked): the undo window of a catalogue
    # entry graded `reversible_until` with a `deadline_field`. A tenant keeps ended runs longer
    # than the longest of these (retention.windows), so no step is archived while it can still
    # be undone completely. None: the tool's receipts carry no such deadline.
    undo_window: timedelta | None = None

    # Seconds one call may take before its connector gives up on it; None: the connector's own
    # (HttpConnector: connect plus read timeout), else settings.SEAM_CALL_TIMEOUT_SECONDS.
    call_timeout: float | None = None

    def timeout(self) -> timedelta:
        """How long one call of this tool may take (see `call_timeout`)."""
        if self.call_timeout is not None:
            return timedelta(seconds=self.call_timeout)
        try:
            connector = self.get_connector()
        except UnknownTool:
            connector = None
        if isinstance(connector, TimedConnector):
            return timedelta(seconds=connector.call_timeout)
        return timedelta(seconds=float(settings.SEAM_CALL_TIMEOUT_SECONDS))

    def describe_receipt(self, receipt: Mapping[str, Any]) -> str:
        if self.receipt_detail:
            try:
                return self.receipt_detail.format_map(dict(receipt))
            except (KeyError, IndexError, ValueError):
                pass  # a receipt without a field the template names: fall back to listing it
        return ", ".join(f"{name} {value}" for name, value in receipt.items())

    def get_connector(self) -> Connector:
        if self.connector is not None:
            return self.connector
        return self._built_connector

    @functools.cached_property
    def _built_connector(self) -> Connector:
        if not self.connector_path:
            raise UnknownTool(f"tool {self.name} has no connector")
        connector: Connector = import_string(self.connector_path)(**self.connector_options)
        return connector

    @functools.cached_property
    def _validator(self) -> jsonschema.Draft202012Validator:
        jsonschema.Draft202012Validator.check_schema(dict(self.args_schema))
        return jsonschema.Draft202012Validator(dict(self.args_schema))

    def validate(self, args: Mapping[str, Any]) -> None:
        errors = sorted(self._validator.iter_errors(dict(args)), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            path = ".".join(str(p) for p in first.absolute_path)
            raise ArgumentsRefused(
                f"{self.name}: {'args.' + path if path else 'args'}: {first.message}",
                field=f"args.{path}" if path else "args",
            )


@functools.cache
def _registry() -> dict[str, ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    for module_name, spec in discovery.declared("tools", ToolSpec):
        if spec.name in specs:
            raise ValueError(f"tool {spec.name} is declared twice ({module_name})")
        specs[spec.name] = spec
    return specs


def all_tools() -> dict[str, ToolSpec]:
    return dict(_registry())


def get_tool(name: str) -> ToolSpec:
    spec = find_tool(name)
    if spec is None:
        raise UnknownTool(f"no tool named {name!r} is registered{known_tools_words(name)}")
    return spec


KNOWN_TOOLS_SHOWN = 20


def known_tools_words(name: str) -> str:
    """The declared tools, for a message about the unknown `name`: those whose names are close
    to it first (a misspelling's likely meaning), then the rest; '' when none are declared."""
    known = sorted(_registry())
    if not known:
        return ""
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    ordered = [*close, *(tool for tool in known if tool not in close)]
    shown = ", ".join(ordered[:KNOWN_TOOLS_SHOWN])
    more = len(ordered) - KNOWN_TOOLS_SHOWN
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{hint}; the declared tools are {shown}{f' and {more} more' if more > 0 else ''}"


UNDECLARED_TOOLS_CHOICES = ("refuse", "accept")


def undeclared_tools_refused() -> bool:
    """Whether an intent for a tool no installed app declares is refused: when tools are declared and
    settings.SEAM_UNDECLARED_TOOLS is `refuse` (the default). A misspelt name would otherwise be
    journaled under a tool nobody can reconcile. `accept` is for deployments whose agents also
    run tools Seam never calls and that are not declared (see docs/api.md)."""
    policy = settings.SEAM_UNDECLARED_TOOLS
    if policy not in UNDECLARED_TOOLS_CHOICES:
        raise ImproperlyConfigured(
            f"SEAM_UNDECLARED_TOOLS is {policy!r}; expected one of {', '.join(UNDECLARED_TOOLS_CHOICES)}"
        )
    return policy == "refuse" and bool(_registry())


def find_tool(name: str) -> ToolSpec | None:
    """The registered tool of that name, or None (journaling an unregistered tool is allowed)."""
    return _registry().get(name)


def reset_registry() -> None:
    """Forget loaded tools (INSTALLED_APPS changed, or a setting a seam module's tools read)."""
    _registry.cache_clear()


def in_flight_floor() -> InFlightFloor:
    """How long after its intent was recorded each tool's call may still be acting downstream:
    its call timeout plus settings.SEAM_IN_FLIGHT_MARGIN_SECONDS (a provider may finish what it
    started after the caller gave up). An unregistered tool's call timeout is the default one."""
    margin = timedelta(seconds=float(settings.SEAM_IN_FLIGHT_MARGIN_SECONDS))
    return InFlightFloor(
        default=timedelta(seconds=float(settings.SEAM_CALL_TIMEOUT_SECONDS)) + margin,
        by_tool={name: spec.timeout() + margin for name, spec in _registry().items()},
    )


def registered_arguments_check(tool: str, args: Mapping[str, Any]) -> None:
    """The journal's check of an intent's arguments: a registered tool's must satisfy its schema
    (ArgumentsRefused otherwise). An unregistered tool is refused, naming the field `tool` and the
    declared tools, where undeclared tools are (undeclared_tools_refused); else it passes."""
    spec = find_tool(tool)
    if spec is not None:
        spec.validate(args)
    elif undeclared_tools_refused():
        raise ArgumentsRefused(
            f"no tool named {tool!r} is declared (SEAM_UNDECLARED_TOOLS=refuse){known_tools_words(tool)}",
            field="tool",
        )
