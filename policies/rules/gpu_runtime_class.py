"""gpu-runtime-class: runtimeClassName names a RuntimeClass the cluster lacks, or a required one is absent.

Two checks:

* With cluster facts: ``runtimeClassName`` names a RuntimeClass the facts do not contain.  The
  RuntimeClass admission plugin then rejects the Pod ("pod rejected: RuntimeClass "x" not
  found", plugin/pkg/admission/runtimeclass); for a controller the rejection shows up only as
  failed pod creations in its events.  The GPU Operator creates ``nvidia`` (plus
  ``nvidia-legacy`` and ``nvidia-cdi``); a bare device-plugin install creates none.
* With option ``required`` (no facts needed): a GPU pod sets no ``runtimeClassName``.  Clusters
  whose default containerd runtime is not the NVIDIA runtime and that do not inject GPUs by CDI
  (hand-built k3s/RKE2/microk8s) need ``runtimeClassName: nvidia`` on GPU pods.  Fix: set it.

Failing (the cluster has RuntimeClass ``nvidia`` only)::

    runtimeClassName: nvidia-gpu

Passing::

    runtimeClassName: nvidia

Options: ``required`` — the RuntimeClass every GPU pod must name (e.g. ``nvidia``); null (the
default) disables that check.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.rule import NeedsFacts, Option, RuleContext
from policies.types import RelOp, Severity, Violation
from policies.wording import did_you_mean, suggest

ID = "gpu-runtime-class"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS: NeedsFacts = "partly"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = True
SUMMARY = "runtimeClassName names a RuntimeClass the cluster lacks, or a required RuntimeClass is absent."
REMEDIATION = "Set runtimeClassName to a RuntimeClass the cluster has (e.g. nvidia)."
OPTIONS: tuple[Option, ...] = (
    Option(
        "required",
        (str, type(None)),
        None,
        "RuntimeClass every GPU pod must set in runtimeClassName (e.g. nvidia); null: not required.",
    ),
)

MISSING_REMEDIATION = "Use a RuntimeClass the cluster has, or create the named one (kind RuntimeClass, node.k8s.io/v1)."


def _missing_message(name: str, known: list[str]) -> str:
    text = f"runtimeClassName {name!r} names a RuntimeClass the cluster does not have"
    if known:
        close = suggest(name, known)
        text += f" (it has {', '.join(known)})"
        if close:
            text += f"; {did_you_mean(close, quote=True)}"
    else:
        text += (
            " (the cluster facts list no RuntimeClass at all; a snapshot should be taken with "
            "`kubectl get nodes,runtimeclasses -o yaml`)"
        )
    return text + f"; the API server rejects the pod with \"RuntimeClass {name!r} not found\""


def check(ctx: RuleContext) -> Iterator[Violation]:
    if not ctx.gpu_requests():
        return
    spec = ctx.pod.spec
    name = spec.get("runtimeClassName")
    if isinstance(name, str) and name:
        if ctx.has_facts and name not in ctx.facts.runtime_classes:
            yield Violation(
                message=_missing_message(name, sorted(ctx.facts.runtime_classes)),
                path=("runtimeClassName",),
                remediation=MISSING_REMEDIATION,
            )
        return
    required = ctx.options.get("required")
    if not isinstance(required, str) or not required or not ctx.pod.scheduling_known:
        return
    yield Violation(
        message=(
            f"the pod requests {', '.join(sorted(ctx.gpu_requests()))} but sets no runtimeClassName; "
            f"this cluster's policy requires GPU pods to run with RuntimeClass {required!r}: "
            f"set runtimeClassName: {required}"
        ),
        path=("runtimeClassName",),
        fix=(RelOp("add", ("runtimeClassName",), required),),
    )
