"""One paginated list through a ``kubernetes`` client method: pages, tokens, statuses, connections."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gpuguard.kube.pager import ContinueExpired, ListStatusError, pages_of
from gpuguard.kube.status import status_of

TIMEOUT = (1.0, 2.0)


class Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.data = body
        self.released = False

    def release_conn(self) -> None:
        self.released = True


def page(names: list[str], token: str = "", version: str = "7") -> bytes:
    return json.dumps({"kind": "NodeList", "metadata": {"continue": token, "resourceVersion": version},
                       "items": [{"metadata": {"name": n}} for n in names]}).encode()


class Method:
    """A client ``list_*`` method answering from a script, recording every call."""

    def __init__(self, *answers: Response | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.responses: list[Response] = []

    def __call__(self, **kwargs: Any) -> Response:
        self.calls.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        self.responses.append(answer)
        return answer


def test_pages_follow_the_continue_token_and_release_every_connection() -> None:
    method = Method(Response(200, page(["a", "b"], token="t1")), Response(200, page(["c"], version="9")))
    counted: list[int] = []
    pages = list(pages_of(method, page_size=2, timeout=TIMEOUT, on_call=lambda: counted.append(1),
                          label_selector="x=y"))
    assert [[json.loads(bytes(r))["metadata"]["name"] for r in p.items] for p in pages] == [["a", "b"], ["c"]]
    assert [p.more for p in pages] == [True, False] and pages[-1].resource_version == "9"
    assert method.calls == [
        {"label_selector": "x=y", "limit": 2, "_preload_content": False, "_request_timeout": TIMEOUT},
        {"label_selector": "x=y", "limit": 2, "_preload_content": False, "_request_timeout": TIMEOUT,
         "_continue": "t1"},
    ]
    assert len(counted) == 2 and all(r.released for r in method.responses)


def test_an_expired_token_is_continue_expired_only_after_the_first_page() -> None:
    for gone in (Response(410, b'{"kind":"Status","code":410}'), ApiException(status=410, reason="Gone")):
        method = Method(Response(200, page(["a"], token="t1")), gone)
        with pytest.raises(ContinueExpired) as caught:
            list(pages_of(method, page_size=1, timeout=TIMEOUT))
        assert status_of(caught.value) == 410
    with pytest.raises(ApiException):  # a 410 on the first call is not an expired token
        list(pages_of(Method(ApiException(status=410, reason="Gone")), page_size=1, timeout=TIMEOUT))
    with pytest.raises(ListStatusError) as first:
        list(pages_of(Method(Response(410, b"gone")), page_size=1, timeout=TIMEOUT))
    assert first.value.status == 410


def test_other_statuses_are_errors_that_carry_the_body_and_client_errors_pass_through() -> None:
    method = Method(Response(503, b'{"kind":"Status","message":"etcd is down"}'))
    with pytest.raises(ListStatusError) as caught:
        list(pages_of(method, page_size=1, timeout=TIMEOUT))
    assert status_of(caught.value) == 503 and "etcd is down" in caught.value.body and method.responses[0].released
    with pytest.raises(ApiException) as forbidden:
        list(pages_of(Method(ApiException(status=403, reason="Forbidden")), page_size=1, timeout=TIMEOUT))
    assert status_of(forbidden.value) == 403
