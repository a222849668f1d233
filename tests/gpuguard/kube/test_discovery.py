"""Which version of a resource the audit lists, from discovery documents as the API server writes them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from gpuguard.kube.discovery import ApiError, Discovery, RestClient

GROUPS = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": "kubeflow.org", "versions": [{"groupVersion": "kubeflow.org/v2beta1", "version": "v2beta1"},
                                          {"groupVersion": "kubeflow.org/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "kubeflow.org/v2beta1", "version": "v2beta1"}},
    {"name": "ray.io", "versions": [{"groupVersion": "ray.io/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "ray.io/v1", "version": "v1"}},
]}


def resources(group_version: str, *names: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "groupVersion": group_version, "resources": [
        {"name": n, "singularName": "", "namespaced": "/" not in n, "kind": n.split("/")[0].title().replace("jobs", "Job"),
         "verbs": ["get", "list", "watch"]} for n in names]}


class Canned(RestClient):
    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__(None)
        self.answers = answers
        self.asked: list[str] = []

    def get(self, path: str, query: Sequence[tuple[str, Any]] = ()) -> bytes:
        self.asked.append(path)
        if path not in self.answers:
            raise ApiError(path, 404, "HTTP 404: not found")
        answer = self.answers[path]
        return answer if isinstance(answer, bytes) else json.dumps(answer).encode()


def test_the_preferred_version_wins_when_gpuguard_reads_it() -> None:
    client = Canned({"/apis": GROUPS,
                     "/apis/kubeflow.org/v2beta1": resources("kubeflow.org/v2beta1", "mpijobs", "mpijobs/status"),
                     "/apis/kubeflow.org/v1": resources("kubeflow.org/v1", "mpijobs", "pytorchjobs")})
    discovery = Discovery(client)
    found = discovery.find("kubeflow.org", "mpijobs", ("v1", "v2beta1"))
    assert found is not None and (found.version, found.path) == ("v2beta1", "/apis/kubeflow.org/v2beta1/mpijobs")
    # a kind gpuguard reads only in v1 is listed in v1 although v2beta1 is preferred
    pytorch = discovery.find("kubeflow.org", "pytorchjobs", ("v1",))
    assert pytorch is not None and pytorch.path == "/apis/kubeflow.org/v1/pytorchjobs" and pytorch.namespaced
    assert "mpijobs/status" not in discovery.resources("kubeflow.org", "v2beta1")  # subresources are left out
    assert discovery.find("batch.volcano.sh", "jobs", ("v1alpha1",)) is None  # not installed
    assert client.asked.count("/apis") == 1  # cached


def test_a_version_the_server_lists_but_does_not_serve_is_skipped() -> None:
    client = Canned({"/apis": GROUPS})  # /apis/ray.io/v1 answers 404 (an aggregated API that went away)
    assert Discovery(client).find("ray.io", "rayclusters", ("v1",)) is None


def test_garbage_is_an_api_error_not_a_crash() -> None:
    with pytest.raises(ApiError, match="not an APIGroupList"):
        Discovery(Canned({"/apis": b"<html>proxy error</html>"})).groups()
    failing = Canned({"/apis": GROUPS})
    failing.answers.pop("/apis")

    def forbidden(path: str, query: Sequence[tuple[str, Any]] = ()) -> bytes:
        raise ApiError(path, 403, "HTTP 403: forbidden")

    failing.get = forbidden  # type: ignore[method-assign]
    with pytest.raises(ApiError, match="403"):
        Discovery(failing).resources("ray.io", "v1")  # only 404 means "not served"
