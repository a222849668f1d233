"""deploy/gpuguard-config.schema.json and the chart's config schema are the config model's: a test
fails until `python deploy/generate_config_schema.py` has been run after the model changes."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

from gpuguard.sources.configmodel import config_schema, load_config, schema_text
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
CHART_SCHEMA = DEPLOY / "helm" / "gpuguard" / "values.schema.json"
RUN = "run: python deploy/generate_config_schema.py"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_config_schema", DEPLOY / "generate_config_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schema_file_is_the_models() -> None:
    assert (DEPLOY / "gpuguard-config.schema.json").read_text(encoding="utf-8") == schema_text(), RUN


def test_the_chart_embeds_the_same_schema() -> None:
    chart = json.loads(CHART_SCHEMA.read_text(encoding="utf-8"))
    embedded = chart["properties"]["config"]
    assert embedded == _generator().chart_config(), RUN
    mine = config_schema()
    assert {k: v for k, v in embedded.items() if k != "description"} == {
        k: v for k, v in mine.items() if k not in ("$schema", "title", "description")
    }
    jsonschema.Draft7Validator.check_schema(chart)  # the chart declares draft-07; helm reads it so


def test_the_deploy_config_names_its_schema_and_follows_it() -> None:
    text = (DEPLOY / "gpuguard-config.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=gpuguard-config.schema.json"
    raw = yaml.safe_load(text)
    jsonschema.Draft202012Validator(config_schema()).validate(raw)
    load_config(raw)
