"""The status of a kubernetes client error."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from gpuguard.kube.status import HTTP_GONE, status_message, status_of


def test_status_of_api_errors_and_others() -> None:
    assert status_of(ApiException(status=HTTP_GONE, reason="Expired")) == 410
    assert status_of(ValueError("no status")) is None
    assert status_of(ApiException(reason="transport")) is None  # no HTTP answer: status is None


def test_status_message_of_an_error_body() -> None:
    forbidden = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is forbidden","code":403}'
    assert status_message(forbidden) == "nodes is forbidden"
    assert status_message(forbidden.decode()) == "nodes is forbidden"
    assert status_message(b'{"kind":"Status","message":"' + b"x" * 500 + b'"}') == "x" * 300
    for other in (b"<html>bad gateway</html>", b'{"message": 5}', b"[1]", b""):
        assert status_message(other) is None
