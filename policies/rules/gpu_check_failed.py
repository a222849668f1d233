"""gpu-check-failed: gpuguard could not judge a GPU pod template, so it does not pass it unjudged.

Reported by the engine itself, never by a check of its own, when:

* the template nests deeper than gpuguard reads (``policies.digest.MAX_DEPTH``, 254 levels; no
  real pod spec comes near it, but a CRD that keeps unknown fields can carry anything);
* a rule raised on the template (a defect of gpuguard, worth a report): the finding names the
  rule and the error.

An object the engine cannot read would otherwise be admitted by the webhook's ``failureMode:
allow`` — an admission bought by crashing the engine.  As an error it is denied (a warning under
``enforcement: warn``); setting this rule's severity lower in config is the explicit way to let
such objects through.

Failing::

    spec:
      containers:
      - name: x
        resources: {requests: {nvidia.com/gpu: 1}}
        extra: [[[[[…300 levels…]]]]]      # in a CRD that preserves unknown fields

Passing: any template gpuguard can read.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies, never
from policies.rule import NeedsFacts, Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-check-failed"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = never  # the engine reports this rule's findings itself
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "gpuguard could not judge a GPU pod template (nested too deep, or a rule failed on it)."
REMEDIATION = (
    "Remove the deeply nested data from the object; if a rule failed, report it with the object "
    "(or lower this rule's severity in config to admit such objects unjudged)."
)
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    """The engine reports this rule's findings itself (see ``policies.engine``)."""
    return iter(())
