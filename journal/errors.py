"""What the journal refuses. Every module of the journal raises these (services, transitions),
and the API and the pages answer each with its `status_code`; the write path's own refusals
(StepTaken in journal.intents, IntentInDoubt in journal.calls, ...) are subclasses of these."""

from __future__ import annotations


class JournalError(Exception):
    """A request the journal refuses. `field` names the offending input where there is one;
    nothing has been written when one of these is raised."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(JournalError):
    status_code = 400


class NotFound(JournalError):
    status_code = 404


class Conflict(JournalError):
    status_code = 409
