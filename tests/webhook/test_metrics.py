"""/metrics is valid Prometheus text exposition: Prometheus' own promtool and prometheus-client's
parser read every family the webhook can render, with its type, help and samples."""

from __future__ import annotations

import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from policies.types import Finding, Severity
from tests.support.tools import tool
from webhook.metrics import PUBLISHING, Metrics


def everything() -> str:
    """Every metric with a sample: each method called, every optional section rendered."""
    m = Metrics(known_kinds=("Pod", "Deployment"))
    m.observe_review("validate", "Pod", "CREATE", False, 0.003)
    m.observe_review("mutate", "MadeUpKind", "UPDATE", True, 7.0)  # beyond the last bucket; an unknown kind
    finding = Finding(rule="gpu-limit-missing", severity=Severity.ERROR, message="m", path="/spec", remediation="r",
                      kind="Pod", name="p", namespace="ml")
    m.observe_findings([finding])
    m.observe_would_deny([finding])
    m.count_error("validate", "bad_request")
    m.count_cert_reload("ok", not_after=1_900_000_000.0)
    m.count_cert_reload("expired")
    m.count_ignore_use("honoured")
    m.count_config_reload("invalid", loaded_at=1_764_500_000.0)
    m.count_rejected("plain_http")
    m.count_image_lookup("hit")
    publishing = {key: 3.0 for key, _, _ in PUBLISHING}
    return m.render(12.5, True, 5000, facts_lag_seconds=0.25, publishing=publishing)


def test_promtool_accepts_the_exposition() -> None:
    promtool = tool("promtool", how="apt-get install --no-install-recommends prometheus")
    text = everything()
    proc = subprocess.run([str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    # promtool exits 0 when the text parses; lint remarks (none expected) would come on stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


def test_prometheus_client_parses_every_family_with_its_type() -> None:
    families = {f.name: f for f in text_string_to_metric_families(everything())}
    assert families["gpuguard_admission_reviews"].type == "counter"  # the parser drops _total from counters
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in families["gpuguard_admission_reviews"].samples}
    key = ("gpuguard_admission_reviews_total",
           (("allowed", "false"), ("endpoint", "validate"), ("kind", "Pod"), ("operation", "CREATE")))
    assert samples[key] == 1
    assert any(dict(labels).get("kind") == "other" for _, labels in samples)  # unknown kinds are bounded
    histogram = families["gpuguard_admission_review_duration_seconds"]
    assert histogram.type == "histogram"
    inf = [s for s in histogram.samples if s.name.endswith("_bucket") and s.labels["le"] == "+Inf"]
    assert sum(s.value for s in inf) == 2
    assert families["gpuguard_cluster_facts_lag_seconds"].samples[0].value == 0.25
    for published, typ, _ in PUBLISHING:
        name = f"gpuguard_cluster_facts_{published}".removesuffix("_total")
        assert families[name].type == typ, published
    assert families["python_gc_collections"].type == "counter"
    assert {s.labels["generation"] for s in families["python_gc_collections"].samples} == {"0", "1", "2"}
    assert families["gpuguard_gc_frozen_objects"].type == "gauge"


@pytest.mark.parametrize("value", ['a"b', "back\\slash", "new\nline"])
def test_label_values_are_escaped(value: str) -> None:
    m = Metrics()
    m.count_rejected(value)
    families = {f.name: f for f in text_string_to_metric_families(m.render(None, False, 0))}
    reasons = {s.labels.get("reason") for f in families.values() for s in f.samples}
    assert value in reasons
