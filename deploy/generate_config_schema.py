"""Write deploy/gpuguard-config.schema.json, the JSON Schema of ``.gpuguard.yaml`` (what
``gpuguard config schema`` prints), and the same schema as the ``config`` of the Helm chart's
values.schema.json, so ``helm install`` refuses a policy gpuguard would refuse.

Both come from the config model (gpuguard/sources/configmodel.py).  Run after changing it, a rule's
options or the rules (the test suite fails until you do):

    python deploy/generate_config_schema.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from gpuguard.sources.configmodel import config_schema, json_text, schema_text  # noqa: E402

OUTPUT = HERE / "gpuguard-config.schema.json"
CHART_SCHEMA = HERE / "helm" / "gpuguard" / "values.schema.json"
CHART_DESCRIPTION = (
    "the policy, .gpuguard.yaml: gpuguard's config schema (`gpuguard config schema`, written here by "
    "deploy/generate_config_schema.py); the chart adds the release namespace to exemptNamespaces"
)


def chart_config() -> dict[str, Any]:
    """The chart's ``config`` schema: the config schema, embedded (no dialect or title of its own)."""
    schema = config_schema()
    del schema["$schema"], schema["title"]
    return {"description": CHART_DESCRIPTION, **{k: v for k, v in schema.items() if k != "description"}}


def chart_schema(current: str) -> str:
    """values.schema.json with its ``config`` replaced by ``chart_config()``, the rest as it is."""
    values = json.loads(current)
    values["properties"]["config"] = chart_config()
    return json_text(values)


def main() -> int:
    OUTPUT.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
    CHART_SCHEMA.write_text(chart_schema(CHART_SCHEMA.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {CHART_SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
