"""Factories for rows that are plain data. Journal rows (runs, intents, outcomes) are made
through the services, as the product makes them, so tests never hold a row the product could
not have written."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model

from journal import services
from journal.models import Intent, Membership, Run, Tenant
from scenarios.flows import FLOWS
from scenarios.tickets import TICKETS

# T-40912, the split-slat bench whose run died mid-sequence, as the returns flow plans it, is the
# standard run.
VERSIONS = FLOWS["returns"].run_versions()
BENCH_PLAN = FLOWS["returns"].plan(TICKETS["T-40912"].facts)


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class StaffUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"staff-{n}")
    password = factory.django.Password("correct horse battery staple")
    membership = factory.RelatedFactory("tests.factories.MembershipFactory", factory_related_name="user")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)


def run_via_service(*, tenant: Tenant, actor: services.Actor, **overrides: Any) -> Run:
    fields: dict[str, Any] = {
        "task_type": "returns",
        "ticket_id": "T-40912",
        "order_id": "SU-90317",
        "versions": VERSIONS,
        "plan": BENCH_PLAN,
    }
    fields.update(overrides)
    return services.run_create(tenant=tenant, actor=actor, **fields).run


def call_row(
    run: Run,
    tool: str,
    args: dict[str, Any],
    status: str,
    *,
    n: int,
    at: datetime,
    error_class: str = "",
    **more: Any,
) -> Intent:
    """One call's intent row written directly, as a test of what reads calls needs it (attempt
    counts, timelines, insights): the n-th call of the run, at `at`, with its own key."""
    return Intent.objects.create(
        run=run,
        step_id=f"{run.pk}:1:{tool}:{n}",
        turn=1,
        tool=tool,
        args=args,
        occurrence=n,
        idempotency_key=f"key-{run.pk}-{n}",
        status=status,
        error_class=error_class,
        intended_at=at,
        **more,
    )


def bulk_call_rows(run_id: Any, numbers: range, *, base: datetime, same_time_every: int = 1) -> None:
    """Many open call rows of one run in one insert (a big run, for tests of paging and size):
    the n-th at `base` plus n // `same_time_every` seconds, so rows sharing a time are ordered
    by id."""
    run_created_at = Run.objects.values_list("created_at", flat=True).get(pk=run_id)
    Intent.objects.bulk_create(
        [
            Intent(
                run_id=run_id,
                run_created_at=run_created_at,
                step_id=f"{run_id}:{n}:lookup",
                turn=n,
                tool="lookup",
                args={"n": n},
                idempotency_key=f"k-{run_id}-{n}",
                intended_at=base + timedelta(seconds=n // same_time_every),
            )
            for n in numbers
        ],
        batch_size=1000,
    )
