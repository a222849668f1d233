"""gpu-dra-device-class: a claim asks for a DeviceClass the cluster does not have.

Every DRA request names a DeviceClass (``exactly.deviceClassName``, or one per ``firstAvailable``
subrequest).  The API server only checks that the name is a DNS subdomain; the scheduler finds out
that the class is missing when it tries to place the pod, and leaves it Pending with ``0/N nodes are
available: request <r>: device class <c> does not exist`` (kubernetes pkg/scheduler/framework/
plugins/dynamicresources, PreFilter; seen in kubernetes-sigs/dra-driver-nvidia-gpu#338, where the
NVIDIA chart was installed without its GPU classes).  Every alternative of a ``firstAvailable``
request is validated before any is tried, so each must exist.

Judged on ResourceClaims and ResourceClaimTemplates (objects), and on a pod's claims that resolve to
the cluster's claims and templates (at the pod's ``spec.resourceClaims`` entry).  It needs the
cluster's DeviceClasses (a snapshot with DeviceClasses or ResourceSlices, or the live cluster);
DeviceClasses in the same input count as existing.

Failing (NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/quickstart/v1/imex-test1.yaml: the chart
installs ``compute-domain-default-channel.nvidia.com``, not ``imex.nvidia.com``)::

    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {namespace: imex-test1, name: deployment0-imex-channel}
    spec:
      devices:
        requests:
        - name: channel
          exactly:
            deviceClassName: imex.nvidia.com

Passing (demo/specs/quickstart/v1/gpu-test1.yaml)::

    spec:
      spec:
        devices:
          requests:
          - name: gpu
            exactly:
              deviceClassName: gpu.nvidia.com
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies, has_dra_claims
from policies.dra.facts import DraView
from policies.dra.subjects import Subject, alternatives, object_subject, unallocated_pod_subjects
from policies.rule import NeedsFacts, ObjectContext, Option, RuleContext
from policies.types import Severity, Violation
from policies.wording import did_you_mean, suggest

ID = "gpu-dra-device-class"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = has_dra_claims  # judges the pod's claims (spec.resourceClaims) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A DRA request names a DeviceClass the cluster does not have; the pod stays Pending."
REMEDIATION = (
    "Use a DeviceClass the cluster has (`kubectl get deviceclasses`), or install the driver or chart "
    "option that creates it."
)
OPTIONS: tuple[Option, ...] = ()


def _known(view: DraView) -> str:
    names = view.class_names()
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"the cluster has {shown}" if names else "the cluster has no DeviceClass"


def _judge(subject: Subject, view: DraView) -> Iterator[Violation]:
    for alt in alternatives(subject.spec):
        name = alt.device_class_name
        if not name or view.device_class(name) is not None:
            continue
        close = suggest(name, view.class_names(), cutoff=0.75)
        hint = f"; {did_you_mean(close)}" if close else ""
        yield Violation(
            subject.say(
                f"request {alt.qualified_name}: device class {name} does not exist ({_known(view)}{hint}); "
                "the scheduler keeps the pod Pending"
            ),
            subject.path(alt.pointer + "/deviceClassName"),
            anchor=subject.anchor,
        )


def check(ctx: RuleContext) -> Iterator[Violation]:
    if not ctx.dra.classes_known:
        return
    for subject in unallocated_pod_subjects(ctx.pod, ctx.namespace, ctx.dra):
        yield from _judge(subject, ctx.dra)


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    subject = object_subject(ctx.obj)
    if subject is None or subject.allocated or not ctx.dra.classes_known:
        return
    yield from _judge(subject, ctx.dra)
