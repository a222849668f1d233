"""The HTTP statuses gpuguard's API clients act on, and the status of a ``kubernetes`` client error."""

from __future__ import annotations

import json

HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_GONE = 410  # an expired list continue token or watch resourceVersion


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an ``ApiException`` (or any error carrying an int ``status``), else None."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def status_message(body: bytes | str) -> str | None:
    """The ``message`` of the API server's ``Status`` object in an error body (at most 300 characters)."""
    try:
        status = json.loads(body)
    except ValueError:
        return None
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])[:300]
    return None
