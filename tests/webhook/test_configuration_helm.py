"""The Helm chart's webhook configurations come from the generator of deploy/webhooks.yaml."""

from __future__ import annotations

import pytest

from policies.config import Config
from tests.support.paths import ROOT
from webhook import configuration_helm
from webhook.configuration import GenerationError, Layout, render
from webhook.configuration_helm import CHART_TEMPLATE, HelmLayout, render_chart_template


def test_chart_template_is_generated() -> None:
    on_disk = (ROOT / CHART_TEMPLATE).read_text()
    assert on_disk == render_chart_template(), "run: python deploy/generate_webhooks.py"


def test_only_the_release_parts_differ_from_the_kustomize_text() -> None:
    plain_docs = render(Config(), Layout()).split("\n---\n")
    helm_docs = render(Config(), HelmLayout()).split("\n---\n")
    assert len(plain_docs) == len(helm_docs) == 2
    for plain_text, helm_text in zip(plain_docs, helm_docs, strict=True):
        plain, helm = plain_text.splitlines(), helm_text.splitlines()
        # from the rules on, every line is the kustomize one except the GPU name test, which Helm extends
        tail_plain, tail_helm = plain[plain.index("    rules:"):], helm[helm.index("    rules:"):]
        assert len(tail_plain) == len(tail_helm) > 100
        differ = [(a, b) for a, b in zip(tail_plain, tail_helm, strict=True) if a != b]
        assert len(differ) == 1
        ((a, b),) = differ
        assert "gpuguard.extraGpuNames" in b and b.startswith(a.removesuffix(")))"))


def test_cel_that_helm_would_read_as_an_action_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = render

    def with_braces(config: Config | None = None, layout: Layout | None = None) -> str:
        return real(config, layout).replace("has(object.spec)", "has(object.spec{{x}})")

    monkeypatch.setattr(configuration_helm, "render", with_braces)
    with pytest.raises(GenerationError, match="contains '\\{\\{' or '\\}\\}'"):
        render_chart_template()
