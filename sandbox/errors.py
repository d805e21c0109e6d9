"""How the sandbox refuses a request, and how it drops one.

A SandboxError becomes a JSON error body `{"error": {"code", "message", "field"}}` with its
status; nothing has been written when one is raised. DropConnection is not an error at all: it
is the `drop_after` fault's instruction to the server to hang up without answering."""

from __future__ import annotations


class SandboxError(Exception):
    status_code = 400

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def as_json(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


class InvalidRequest(SandboxError):
    status_code = 400


class UnknownObject(SandboxError):
    status_code = 404


class Conflict(SandboxError):
    status_code = 409


class Unavailable(SandboxError):
    status_code = 503


class DropConnection(BaseException):
    """Raised by a view after its effect is committed, to make the server close the TCP
    connection without writing a byte (the `drop_after` fault).

    It derives from BaseException on purpose: Django turns every `Exception` escaping a view into
    a 500 response, and a 500 is an answer. This must pass through Django untouched to
    sandbox.server, the only layer that owns the socket. Under any other server it surfaces as
    that server's own error handling."""
