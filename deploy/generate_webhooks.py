"""Write deploy/webhooks.yaml: ``gpuguard webhook-config`` for the policy in deploy/gpuguard-config.yaml;
and the Helm chart's templates/webhooks.yaml, the same configurations with Helm expressions where
a release decides (webhook/configuration_helm.py).

The webhook ``rules`` and the ``gpu-workload`` matchCondition follow policies/podspec.py WORKLOADS
and the config's podTemplatePaths and gpuResourceNames; the namespaceSelector its
exemptNamespaces (webhook/configuration.py).  Run after changing either (the test suite fails
until you do):

    python deploy/generate_webhooks.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from gpuguard.sources.configmodel import load_config  # noqa: E402
from gpuguard.sources.yamlsafe import load_all_plain  # noqa: E402
from policies.config import Config  # noqa: E402
from webhook.configuration import render as render_for  # noqa: E402
from webhook.configuration_helm import CHART_TEMPLATE, render_chart_template  # noqa: E402

OUTPUT = HERE / "webhooks.yaml"
CHART_OUTPUT = HERE.parent / CHART_TEMPLATE
CONFIG = HERE / "gpuguard-config.yaml"  # packed into the ConfigMap by kustomization.yaml


def deploy_config() -> Config:
    """The policy config the deployed webhook runs with."""
    (raw,) = list(load_all_plain(CONFIG.read_text(encoding="utf-8"), str(CONFIG)))
    return load_config(raw)


def render() -> str:
    return render_for(deploy_config())


def main() -> int:
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
    CHART_OUTPUT.write_text(render_chart_template(), encoding="utf-8")
    print(f"wrote {CHART_OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
