"""One paginated list through the ``kubernetes`` client, a page per call, following ``continue`` tokens.

The live listing (why-pending, audit) and the webhook's reflectors list alike: ``limit`` items a
call, the body left undecoded by the client (``_preload_content=False``) and decoded here by
msgspec into raw items, the connection released after every page.  An expired token (HTTP 410 on
a call that sent one) is ``ContinueExpired``, for the caller to start the list over; any other
non-2xx answer is ``ListStatusError``; errors the client raises itself pass through unchanged
(``gpuguard.kube.status.status_of`` reads the status of all three).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuguard.kube.prune import PAGE
from gpuguard.kube.status import HTTP_GONE, status_of


class ContinueExpired(Exception):
    """The continue token of a later page expired (HTTP 410): the list must start over."""

    status = HTTP_GONE


class ListStatusError(Exception):
    """A page answered with a non-2xx status the client did not raise for."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.reason = f"HTTP {status}"
        self.body = body[:200].decode("utf-8", "replace")
        super().__init__(f"{self.reason}: {self.body}")


@dataclass(frozen=True, slots=True)
class Page:
    items: list[msgspec.Raw]
    resource_version: str
    more: bool  # another page follows


def pages_of(
    method: Callable[..., Any],
    *,
    page_size: int,
    timeout: tuple[float, float],
    on_call: Callable[[], None] | None = None,
    **kwargs: Any,
) -> Iterator[Page]:
    """Every page of ``method(**kwargs)`` (a client ``list_*`` method); ``on_call`` before each call."""
    token: str | None = None
    while True:
        call = {**kwargs, "limit": page_size, "_preload_content": False, "_request_timeout": timeout}
        if token:
            call["_continue"] = token
        if on_call is not None:
            on_call()
        try:
            resp = method(**call)
        except Exception as exc:
            if token and status_of(exc) == HTTP_GONE:
                raise ContinueExpired(str(exc)) from None
            raise
        try:
            status = getattr(resp, "status", 200)
            body = resp.data
        finally:
            resp.release_conn()
        if status == HTTP_GONE and token:
            raise ContinueExpired(f"HTTP {status}")
        if not 200 <= status <= 299:
            raise ListStatusError(status, body)
        page = PAGE.decode(body)
        token = page.metadata.get("continue") or None
        yield Page(page.items or [], str(page.metadata.get("resourceVersion") or ""), token is not None)
        if not token:
            return
