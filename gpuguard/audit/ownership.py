"""Which audited object each object is reported through.

A pod that a ReplicaSet made for a Deployment runs the Deployment's template: judging every pod
would repeat the Deployment's findings once per replica.  So an object whose controller (the
``ownerReferences`` entry with ``controller: true``; k8s.io/apimachinery ObjectMeta: "If true,
this reference points to the managing controller") is, directly or through its own controller,
an audited object of a kind gpuguard reads, is reported once, through the topmost such owner.
Owners of kinds gpuguard cannot read (a CRD without ``podTemplatePaths``, a Node owning mirror
pods) do not count: their pods are judged themselves.

Owners are matched by uid; objects without a uid (hand-written dumps) by group, kind, namespace
and name.  ``kubectl get deploy,sts,…,pods`` leaves ReplicaSets out unless ``rs`` is named, so a
pod whose ReplicaSet is missing is matched to its Deployment by the controller's naming: the
ReplicaSet of a Deployment is named ``<deployment>-<pod-template-hash>`` and its pods carry the
``pod-template-hash`` label (kubernetes.io/docs/concepts/workloads/controllers/deployment:
"the name of the ReplicaSet is always formatted as [DEPLOYMENT-NAME]-[HASH]" and "The
pod-template-hash label is added by the Deployment controller to every ReplicaSet that a
Deployment creates or adopts"; pkg/controller/deployment/sync.go getNewReplicaSet names it
``d.Name + "-" + podTemplateSpecHash``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuguard.audit.model import ObjectRef
from policies.shapes import as_dict, as_list

POD_TEMPLATE_HASH = "pod-template-hash"
MAX_CHAIN = 16  # ownership chains are a few links long; a longer one is a cycle or garbage


@dataclass(frozen=True, slots=True)
class Link:
    """An object's controller, as its ``ownerReferences`` name it."""

    group: str
    kind: str
    name: str
    uid: str
    namespace: str  # owners of namespaced objects live in the same namespace (or are cluster-scoped)
    template_hash: str = ""  # a pod's pod-template-hash label, for the Deployment fallback


def controller_link(obj: Mapping[str, Any], namespace: str) -> Link | None:
    meta = as_dict(obj.get("metadata"))
    for ref in as_list(meta.get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("controller") is not True:
            continue
        api_version, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
        if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str)):
            continue
        uid = ref.get("uid")
        labels = as_dict(meta.get("labels"))
        template_hash = labels.get(POD_TEMPLATE_HASH)
        return Link(api_version.rpartition("/")[0], kind, name, uid if isinstance(uid, str) else "", namespace,
                    template_hash if isinstance(template_hash, str) else "")
    return None


class Ownership:
    """Links between the objects seen so far; answers "through which audited owner is X reported"."""

    def __init__(self) -> None:
        self._links: dict[str, Link] = {}
        self._audited: set[str] = set()  # keys of objects of kinds gpuguard reads
        self._by_name: dict[tuple[str, str, str, str], str] = {}  # (group, kind, namespace, name) -> key
        self._keys: set[str] = set()

    def add(self, ref: ObjectRef, link: Link | None, readable: bool) -> None:
        key = ref.key
        self._keys.add(key)
        if link is not None:
            self._links[key] = link
        if readable:
            self._audited.add(key)
        if ref.kind != "Pod":  # pods own nothing gpuguard reads; keep the index small
            self._by_name[(ref.group, ref.kind, ref.namespace, ref.name)] = key

    def remove(self, ref: ObjectRef) -> None:
        """Forget an object (a streamed List item withdrawn because its document was no List)."""
        key = ref.key
        self._keys.discard(key)
        self._links.pop(key, None)
        self._audited.discard(key)
        name = (ref.group, ref.kind, ref.namespace, ref.name)
        if self._by_name.get(name) == key:
            del self._by_name[name]

    def _resolve(self, link: Link) -> str | None:
        if link.uid and link.uid in self._keys:
            return link.uid
        for namespace in (link.namespace, ""):
            found = self._by_name.get((link.group, link.kind, namespace, link.name))
            if found is not None:
                return found
        if link.kind == "ReplicaSet" and link.group == "apps" and link.template_hash:
            suffix = "-" + link.template_hash
            if link.name.endswith(suffix):
                return self._by_name.get(("apps", "Deployment", link.namespace, link.name[: -len(suffix)]))
        return None

    def owner_via(self, link: Link) -> str | None:
        """The topmost audited object an object with controller ``link`` would be reported through."""
        parent = self._resolve(link)
        if parent is None:
            return None
        above = self.owner(parent)
        if above is not None:
            return above
        return parent if parent in self._audited else None

    def owner(self, key: str) -> str | None:
        """The topmost audited object ``key`` is reported through (None: it is reported itself)."""
        found = None
        seen = {key}
        current = key
        for _ in range(MAX_CHAIN):
            link = self._links.get(current)
            if link is None:
                break
            parent = self._resolve(link)
            if parent is None or parent in seen:
                break
            seen.add(parent)
            if parent in self._audited:
                found = parent
            current = parent
        return found
