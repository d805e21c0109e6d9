"""Factories for rows that are plain data. Journal rows (runs, intents, outcomes) are made
through the services, as the product makes them, so tests never hold a row the product could
not have written."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from journal import services
from journal.models import Membership, Run, Tenant
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
