from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from audit.chain import audit_verification_run
from audit.models import AuditVerification


class Command(BaseCommand):
    help = (
        "Check the audit trail's hash chain from its first row; report the first broken link. "
        "The result is kept, and shown on the audit page."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        requested = AuditVerification.objects.create(requested_at=timezone.now())
        report = audit_verification_run(verification_id=requested.pk)
        if not report.ok:
            raise CommandError(
                f"audit chain broken at row #{report.broken_at}: {report.problem} "
                f"({report.checked} rows before it verified)"
            )
        self.stdout.write(self.style.SUCCESS(f"audit chain intact: {report.checked} rows verified"))
