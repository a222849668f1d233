"""The cluster's objects for one run: from dump files or a live cluster (read-only lists)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies.pending.state import ClusterObjects

DEFAULT_NAMESPACE = "default"
# Where a pod's namespace is mounted: "the default namespace to be used for namespaced API
# operations is placed in a file at /var/run/secrets/kubernetes.io/serviceaccount/namespace in each
# container" (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class GatherError(Exception):
    """The objects could not be had; the message says which input and why (one line per problem)."""


@dataclass(slots=True)
class Gathered:
    objects: ClusterObjects
    source: str  # "dump cluster.json" or "cluster https://…"
    live: bool
    notes: list[str] = field(default_factory=list)


def from_dumps(files: Sequence[str]) -> Gathered:
    """Objects of every dump (a directory: its ``*.yaml``, ``*.yml`` and ``*.json`` files, as
    ``audit`` reads it); any unreadable or invalid file fails the run (an analysis of part of a
    cluster would misstate free GPUs), naming every problem.  In a directory, a file holding none
    of the objects the analysis reads (a manifest, a config) is passed over."""
    from gpuguard.kube.dump import STDIN, load_dumps
    from gpuguard.sources.inputs import collect
    from gpuguard.sources.yamlsafe import InputError

    inputs, errors = collect(list(files))
    names = [STDIN if item.path is None else item.name for item in inputs]
    optional = {item.name for item in inputs if item.path is not None and item.name not in files}
    walked = {item.root for item in inputs if item.name in optional}
    for directory in (f for f in files if f != STDIN and os.path.isdir(f)):
        if Path(directory) not in walked:
            errors.append(InputError(directory, 0, f"no *.yaml, *.yml or *.json file in directory {directory}"))
    load = load_dumps(names, optional=optional)
    load.errors.extend(errors)
    if load.errors:
        raise GatherError("\n".join(e.text() for e in load.errors))
    return Gathered(load.objects, "dump " + ", ".join(load.files), live=False)


def context_namespace(kubeconfig: str | None, in_cluster: bool) -> str:
    """The namespace kubectl would use: the kubeconfig's current context's, the service account's
    in a pod, else ``default``."""
    if in_cluster:
        try:
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
        except OSError:
            return DEFAULT_NAMESPACE
    try:
        from kubernetes import config as kube_config

        config: Any = kube_config
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # no kubeconfig: loading the client reports it
        return DEFAULT_NAMESPACE
    namespace = (active or {}).get("context", {}).get("namespace") if isinstance(active, dict) else None
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE


def from_cluster(kubeconfig: str | None, in_cluster: bool, namespace: str | None) -> Gathered:
    """List nodes, pods, FailedScheduling events, PriorityClasses, RuntimeClasses and NodePools (and
    DRA objects, FailedCreate events, ResourceQuotas, queued Jobs and Kueue objects: gpuguard.kube.live).

    ``namespace``: where the pods to explain live (events are listed there only); None for all.
    """
    from gpuguard.kube.live import LiveError, api_client_from, list_cluster

    try:
        client = api_client_from(kubeconfig, in_cluster)
    except Exception as exc:  # ConfigException, missing files, bad YAML: all mean "cannot connect"
        where = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        raise GatherError(f"cannot load the {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                          ) from None
    host = str(getattr(client.configuration, "host", "") or "the API server")
    try:
        with client:
            listing = list_cluster(client, namespace)
    except LiveError as exc:
        raise GatherError(f"{host}: {exc}") from None
    return Gathered(listing.objects, f"cluster {host}", live=True, notes=list(listing.notes))


def _name_of(obj: Any) -> tuple[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def in_name_order(objects: ClusterObjects) -> ClusterObjects:
    """Nodes and pods sorted by (namespace,) name, so the report does not depend on the order the
    API server or a dump happened to list them in."""
    objects.nodes.sort(key=_name_of)
    objects.pods.sort(key=_name_of)
    return objects
