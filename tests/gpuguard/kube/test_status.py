"""The status of a kubernetes client error."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from gpuguard.kube.status import HTTP_GONE, status_of


def test_status_of_api_errors_and_others() -> None:
    assert status_of(ApiException(status=HTTP_GONE, reason="Expired")) == 410
    assert status_of(ValueError("no status")) is None
    assert status_of(ApiException(reason="transport")) is None  # no HTTP answer: status is None
