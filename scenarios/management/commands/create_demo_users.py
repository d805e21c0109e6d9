"""The demo's tenants, role groups and users (`make demo`), each with a fresh random password printed
once. Part of the demo (scenarios), so a production deployment has no such command."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from compensations.defaults import catalogue_grant_roles
from console.roles import roles_grant
from journal.models import Membership, Tenant

DEMO_TENANTS = {"sundry": "Sundry Marketplace", "acme": "Acme Outdoor (another tenant)"}
# (username, tenant, group, is_staff, is_superuser)
DEMO_USERS = [
    ("support", "sundry", "support_staff", False, False),
    ("lead", "sundry", "team_lead", False, False),
    ("admin", "sundry", "admin", True, True),
    ("outsider", "acme", "support_staff", False, False),
]


class Command(BaseCommand):
    help = "Create the demo tenants, role groups and users, with fresh random passwords, and print them."

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = {
            slug: Tenant.objects.update_or_create(slug=slug, defaults={"name": name})[0]
            for slug, name in DEMO_TENANTS.items()
        }
        # The role groups and their permissions come with the migrations; granting again is
        # harmless and mends a database whose groups were emptied by hand.
        catalogue_grant_roles()
        roles_grant()
        user_model = get_user_model()
        self.stdout.write("Demo users (passwords are new each time this runs):")
        for username, tenant_slug, group_name, is_staff, is_superuser in DEMO_USERS:
            group, _ = Group.objects.get_or_create(name=group_name)
            user, _ = user_model.objects.get_or_create(username=username)
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.is_staff = is_staff
            user.is_superuser = is_superuser
            user.save()
            user.groups.set([group])
            Membership.objects.update_or_create(user=user, defaults={"tenant": tenants[tenant_slug]})
            self.stdout.write(f"  {username:<9} {password:<14} {group_name} @ {tenant_slug}")
