from typing import Any

from django.core.management.base import BaseCommand, CommandError

from handover.audit import audit_verify


class Command(BaseCommand):
    help = "Check the audit trail's hash chain from its first row; report the first broken link."

    def handle(self, *args: Any, **options: Any) -> None:
        report = audit_verify()
        if not report.ok:
            raise CommandError(
                f"audit chain broken at row #{report.broken_at}: {report.problem} "
                f"({report.checked} rows before it verified)"
            )
        self.stdout.write(self.style.SUCCESS(f"audit chain intact: {report.checked} rows verified"))
