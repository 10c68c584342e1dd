"""Domain errors raised by services; one handler in app.main maps them to HTTP."""

from __future__ import annotations


class DomainError(Exception):
    """An error whose message is a sentence a user can act on. `field`, where given, names the
    keyword argument the sentence is about, so a page can show it beside that field."""

    status_code = 400

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotFound(DomainError):
    status_code = 404


class Forbidden(DomainError):
    status_code = 403


class NotAuthenticated(DomainError):
    status_code = 401


class Invalid(DomainError):
    status_code = 422


class Conflict(DomainError):
    status_code = 409


class TooLarge(DomainError):
    status_code = 413


class RateLimited(DomainError):
    """Too many requests; `retry_after` says how many seconds to wait."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Closed(DomainError):
    """The lab does not accept submissions now (not released yet, or past due and refusing)."""

    status_code = 403


class ServerBusy(DomainError):
    """Every request thread stayed busy for longer than a request may wait for one."""

    status_code = 503

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
