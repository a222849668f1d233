"""What the rules read of a pod template: the content of its rule-results memo key.

The rule-results memo (``policies.engine``) lets the pods of one controller be judged once.  But
the pods a controller creates are not byte-identical when they reach the webhook, and a key over
the whole spec would never hit twice for them:

* the ServiceAccount admission plugin, which runs before admission webhooks, adds to every pod a
  projected volume named ``kube-api-access-`` plus a random suffix and mounts it in every
  container at ``/var/run/secrets/kubernetes.io/serviceaccount`` (kubernetes
  ``plugin/pkg/admission/serviceaccount/admission.go``: ``ServiceAccountVolumeName``,
  ``mountServiceAccountToken`` with ``s.generateName(ServiceAccountVolumeName + "-")``);
* a StatefulSet sets each pod's ``hostname`` and ``subdomain`` and names its claims per pod
  (``persistentVolumeClaim.claimName``); an Indexed Job sets ``hostname`` to
  ``${jobName}-${completionIndex}`` (kubernetes.io, "Job with Pod-to-Pod Communication");
* training operators give each replica its own environment (``RANK``, ``MASTER_ADDR``…);
* controllers, CI tools and injectors add annotations of their own.

No rule reads any of that.  What they read of these fields, and so what the key keeps:

* environment variables named ``NVIDIA_*`` or ``CUDA_VERSION`` (``policies.cuda.environment``,
  ``policies.signals.device_env``), whole, the names of those a distributed launcher or NCCL reads
  (``NCCL_*``, ``MASTER_ADDR``…, ``policies.shm_users``), and where every entry is (findings point
  at an entry by its index); the name and value of any other variable are never read;
* volume names, only to match a mount at ``/dev/shm`` to its volume and to pick a free ``dshm``
  name for a fix; a volume's ``emptyDir`` and ``hostPath``; never a claim name;
* annotations under ``gpuguard.io/`` (``policies.cuda.resolve``, ``policies.engine``) and CDI
  annotations and KAI's GPU-share annotations (``policies.signals``).

So the key replaces, in pods, pod templates and bare pod specs (other shapes keep their whole
spec): an unread variable that is a plain ``{name, value}`` pair by a marker in its place (a
launcher's variable keeps its name, and only its value is the marker); a
service-account token volume's generated name (and its mounts' references) by one name, unless
a mount at ``/dev/shm`` names it; string ``hostname``, ``subdomain`` and claim names by markers; and
drops string-valued annotations outside ``gpuguard.io/``.  Only flat strings are replaced, so the
key's nesting (``policies.digest.TooDeep``) is that of the whole template.  Nothing here changes
the template the rules see: equal keys mean equal rule results, which
``tests/policies/test_rule_inputs.py`` checks on the corpus, the fixtures and generated pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.cuda.environment import relevant as cuda_relevant
from policies.podspec import PodTemplate, is_shm_mount
from policies.shm_users import shm_user_variable
from policies.signals import KAI_CONTAINER, KAI_FRACTION, KAI_MEMORY, RUNAI_ALLOCATED, device_env, is_cdi_annotation

# A generated name: apiserver's ``names.SimpleNameGenerator`` appends five characters of
# ``utilrand.String`` (k8s.io/apimachinery ``pkg/util/rand/rand.go``, ``alphanums``) to the prefix.
SERVICE_ACCOUNT_VOLUME_PREFIX = "kube-api-access-"
_GENERATED = frozenset("bcdfghjklmnpqrstvwxz2456789")


def is_service_account_volume(name: str) -> bool:
    """``kube-api-access-`` and five generated characters."""
    prefix = SERVICE_ACCOUNT_VOLUME_PREFIX
    return len(name) == len(prefix) + 5 and name.startswith(prefix) and _GENERATED.issuperset(name[len(prefix):])


CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
PROJECTED_SHAPES = frozenset({"object", "template", "podspec"})
ANNOTATION_DOMAIN = "gpuguard.io/"
# KAI's and Run:ai's GPU shares (policies.signals).
READ_ANNOTATIONS = frozenset({KAI_FRACTION, KAI_MEMORY, KAI_CONTAINER, *RUNAI_ALLOCATED})

# Stand-ins for what was replaced.  They cannot be mistaken for user data: a template that holds
# one of these strings itself is keyed on its whole spec instead.
UNREAD = "\x00unread"
TOKEN_VOLUME = "\x00kube-api-access"
STAND_INS = (UNREAD, TOKEN_VOLUME)


_PLAIN_VARIABLE = frozenset({"name", "value"})


class _HoldsStandIn(Exception):
    """A name or value the key would replace already reads like a stand-in: key the whole spec."""


def _read_env(name: str) -> bool:
    return cuda_relevant(name) or device_env(name) is not None


def _env(env: list[Any]) -> list[Any]:
    out = []
    for var in env:
        if (
            isinstance(var, dict)
            and var.keys() <= _PLAIN_VARIABLE
            and isinstance(name := var.get("name"), str)
            and isinstance(var.get("value", ""), str)
            and not _read_env(name)
        ):
            # A launcher's variable is read by its name alone (its value differs per replica: MASTER_ADDR).
            out.append({**var, "value": UNREAD} if shm_user_variable(name) and "value" in var else UNREAD)
        else:
            out.append(var)
    return out


def _scan_mounts(spec: Mapping[str, Any]) -> set[str]:
    """The names of volumes mounted at ``/dev/shm``, in one pass that also refuses stand-ins."""
    at_shm: set[str] = set()
    for key in CONTAINER_LISTS:
        for c in spec.get(key) or ():
            if not isinstance(c, dict):
                continue
            env = c.get("env")
            if env and UNREAD in env:
                raise _HoldsStandIn
            mounts = c.get("volumeMounts")
            for m in mounts or ():
                if not isinstance(m, dict):
                    continue
                name = m.get("name")
                if name in STAND_INS:
                    raise _HoldsStandIn
                if isinstance(name, str) and isinstance(mounts, list) and is_shm_mount(m):
                    at_shm.add(name)
    return at_shm


def _volumes(volumes: list[Any], keep: set[str]) -> tuple[list[Any], set[str]]:
    """The volumes as keyed, and the token volumes' generated names."""
    out: list[Any] = []
    tokens: set[str] = set()
    for volume in volumes:
        if not isinstance(volume, dict):
            out.append(volume)
            continue
        name = volume.get("name")
        if name in STAND_INS:
            raise _HoldsStandIn
        keyed = volume
        if (
            "projected" in volume
            and isinstance(name, str)
            and name not in keep
            and is_service_account_volume(name)
        ):
            keyed = {**keyed, "name": TOKEN_VOLUME}
            tokens.add(name)
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and isinstance(claim.get("claimName"), str):
            keyed = {**keyed, "persistentVolumeClaim": {**claim, "claimName": UNREAD}}
        out.append(keyed)
    return out, tokens


def _container(c: Any, token_volumes: set[str]) -> Any:
    if not isinstance(c, dict):
        return c
    out = c
    env = c.get("env")
    if isinstance(env, list):
        out = {**out, "env": _env(env)}
    mounts = c.get("volumeMounts")
    if isinstance(mounts, list) and token_volumes:
        out = {**out, "volumeMounts": [
            {**m, "name": TOKEN_VOLUME} if isinstance(m, dict) and _named(m, token_volumes) else m
            for m in mounts
        ]}
    return out


def _named(item: dict[str, Any], names: set[str]) -> bool:
    name = item.get("name")
    return isinstance(name, str) and name in names


def spec_read(pod: PodTemplate) -> Any:
    """The template's spec as the rule-results key sees it (a new structure; ``pod`` is unchanged)."""
    return pod_spec_read(pod.spec) if pod.shape in PROJECTED_SHAPES else pod.spec


def pod_spec_read(spec: Any) -> Any:
    """A pod spec (a Pod's ``spec``, a template's ``spec``) as a key of what rules read sees it."""
    if not isinstance(spec, dict):
        return spec
    try:
        return _projected(spec)
    except (TypeError, _HoldsStandIn):  # a number where a list belongs, or a stand-in: key the whole spec
        return spec


def _projected(spec: dict[str, Any]) -> dict[str, Any]:
    keep = _scan_mounts(spec)
    out = dict(spec)
    for key in ("hostname", "subdomain"):
        if isinstance(out.get(key), str):
            out[key] = UNREAD
    volumes = spec.get("volumes")
    token_volumes: set[str] = set()
    if isinstance(volumes, list):
        out["volumes"], token_volumes = _volumes(volumes, keep)
    elif volumes:
        raise TypeError("volumes is not a list")
    for key in CONTAINER_LISTS:
        containers = spec.get(key)
        if isinstance(containers, list):
            out[key] = [_container(c, token_volumes) for c in containers]
    return out


def annotations_read(annotations: Any) -> Any:
    """The annotations a rule may read (all of a value that is not a string map, as given)."""
    if not isinstance(annotations, dict):
        return annotations
    return {
        k: v for k, v in annotations.items()
        if not (isinstance(v, str) and isinstance(k, str)) or k.startswith(ANNOTATION_DOMAIN) or k in READ_ANNOTATIONS
        or is_cdi_annotation(k)
    }
