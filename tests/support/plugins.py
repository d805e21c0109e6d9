"""Declarations under test: `declaring(*modules)` has Seam read each module as if it were the
seam.py of one more installed app (tools.discovery), beside the installed apps' own, for the
tests of the registries themselves and of a tool or flow declared in a test module. An
integration proves the real path instead, by installing its app (tests/examples)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import import_module
from unittest import mock

from scenarios import registry as flow_registry
from tools import discovery
from tools import registry as tool_registry


def _forget() -> None:
    tool_registry.reset_registry()
    flow_registry.reset_registry()


@contextlib.contextmanager
def declaring(*module_names: str, only: bool = False) -> Iterator[None]:
    """Within: the installed apps' seam modules and then these (by dotted name, imported now);
    `only`: these alone, as if no installed app declared anything."""
    modules = (
        *(() if only else discovery.seam_modules()),
        *(import_module(name) for name in module_names),
    )
    _forget()
    try:
        with mock.patch.object(discovery, "seam_modules", return_value=modules):
            yield
    finally:
        _forget()
