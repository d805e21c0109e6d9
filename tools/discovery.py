"""Seam's plug-ins, the Django way: an installed app declares what it adds to Seam in one module,
`<app>/seam.py`, which Seam finds as django.contrib.admin finds `admin.py`. Which plug-ins are
on is which apps are installed (INSTALLED_APPS): the demo's settings install the sandbox and the
scenarios, production's never do, and an integrator adds their own app.

A `seam.py` defines any of these functions, each returning a list (functions rather than lists,
so a declaration may read settings, such as the URL of the system its connectors call):

    tools()      -> list[tools.registry.ToolSpec]                  the tools Seam calls or asks about
    catalogue()  -> list[compensations.defaults.CatalogueEntrySpec] what undoes each write tool
    policies()   -> list[reconciliation.defaults.TaskPolicySpec]   how a dead run of a task type recovers
    flows()      -> list[scenarios.flows.Flow]                     the flows agents run
    tickets()    -> list[scenarios.tickets.Ticket]                 scripted tickets for the kill harness

Each registry reads its kind through `declared` (tools.registry, compensations.defaults,
reconciliation.defaults, scenarios.registry), so no registry keeps a list of modules of its own.
The modules are imported once, at first use; a change of INSTALLED_APPS (a test's
override_settings) forgets them (tools.apps)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from importlib import import_module
from types import ModuleType

from django.apps import apps
from django.utils.module_loading import module_has_submodule

# The name of the module each installed app may declare its plug-ins in.
SEAM_MODULE = "seam"
# What a seam module may declare: the name of each function.
DECLARATIONS = ("tools", "catalogue", "policies", "flows", "tickets")


@functools.cache
def seam_modules() -> tuple[ModuleType, ...]:
    """The `seam` module of each installed app that has one, in INSTALLED_APPS order."""
    return tuple(
        import_module(f"{app_config.name}.{SEAM_MODULE}")
        for app_config in apps.get_app_configs()
        if module_has_submodule(app_config.module, SEAM_MODULE)
    )


def declared[T](declaration: str, kind: type[T]) -> Iterator[tuple[str, T]]:
    """Each object the seam modules' `declaration()` returns (e.g. "tools"), with the name of
    the module that declared it, in INSTALLED_APPS order. An object not of `kind` is refused
    (TypeError, naming the module), when read rather than when used."""
    if declaration not in DECLARATIONS:
        raise ValueError(f"{declaration!r} is not one of {', '.join(DECLARATIONS)}")
    for module in seam_modules():
        declare = getattr(module, declaration, None)
        if declare is None:
            continue
        for item in declare():
            if not isinstance(item, kind):
                raise TypeError(
                    f"{module.__name__}.{declaration}() returned a {type(item).__name__}, not a {kind.__name__}"
                )
            yield module.__name__, item


def forget_seam_modules() -> None:
    """Find the seam modules again at next use (INSTALLED_APPS changed)."""
    seam_modules.cache_clear()
