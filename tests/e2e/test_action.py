"""The GitHub Action (action.yml): its metadata, and its shell steps run here as a runner would.

What a runner does with a composite action, per GitHub's metadata and workflow syntax references
(docs.github.com/en/actions/reference/workflows-and-actions/metadata-syntax and …/workflow-syntax):
`runs.using: composite` with `runs.steps`; a step with `run` needs `shell`; `shell: bash` runs the
script as `bash --noprofile --norc -eo pipefail {0}`; a step writes outputs as `name=value` lines
to the file `$GITHUB_OUTPUT`; `$GITHUB_ACTION_PATH` / `github.action_path` is the action's own
checkout; a step's `if` is combined with success(), so the steps after a failed one are skipped.
The small runner below does exactly that for the expressions action.yml uses (context lookups,
`==`/`!=` against a string literal); anything else fails the test rather than being guessed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import ROOT, SARIF_SCHEMA
from tests.support.project import snapshot_repo
from tests.support.tools import tool

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
COMPARISON = re.compile(r"^([\w.-]+)\s*(==|!=)\s*'([^']*)'$")
CONTEXT = re.compile(r"^(inputs|steps|github|runner)(\.[\w-]+)+$")

pytestmark = pytest.mark.integration


def _lookup(path: str, ctx: dict[str, Any]) -> str:
    assert CONTEXT.match(path), f"unsupported expression {path!r}"
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


def evaluate(expression: str, ctx: dict[str, Any]) -> str | bool:
    m = COMPARISON.match(expression)
    if m:
        left, op, literal = m.groups()
        return (_lookup(left, ctx) == literal) == (op == "==")
    return _lookup(expression, ctx)


def substitute(text: str, ctx: dict[str, Any]) -> str:
    return EXPRESSION.sub(lambda m: str(evaluate(m.group(1), ctx)), text)


@dataclass
class Run:
    outputs: dict[str, str] = field(default_factory=dict)
    steps: dict[str, dict[str, str]] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    failed: str | None = None
    exit_code: int = 0
    log: str = ""


@dataclass
class Runner:
    """Runs action.yml's steps with bash in ``workspace``; the action's checkout is ``action_path``."""

    action_path: Path
    workspace: Path
    temp: Path
    extra_path: list[Path] = field(default_factory=list)

    def run(self, inputs: dict[str, str], steps: dict[str, dict[str, str]] | None = None, skip: tuple[str, ...] = ()) -> Run:
        declared = ACTION["inputs"]
        assert set(inputs) <= set(declared), f"undeclared inputs {set(inputs) - set(declared)}"
        values = {k: str(v.get("default", "")) for k, v in declared.items()} | inputs
        result = Run(steps={k: dict(v) for k, v in (steps or {}).items()})
        ctx: dict[str, Any] = {
            "inputs": values,
            "steps": {k: {"outputs": v} for k, v in result.steps.items()},
            "github": {"action_path": str(self.action_path), "workspace": str(self.workspace)},
            "runner": {"temp": str(self.temp)},
        }
        for step in ACTION["runs"]["steps"]:
            step_id = step["id"]
            if step_id in skip:
                continue
            if "if" in step and not evaluate(step["if"], ctx):
                continue
            output_file = self.temp / f"output-{step_id}"
            output_file.write_text("")
            env = {
                "PATH": os.pathsep.join([*map(str, self.extra_path), os.environ["PATH"]]),
                "HOME": os.environ.get("HOME", "/root"),
                "GITHUB_OUTPUT": str(output_file),
                "GITHUB_ACTION_PATH": str(self.action_path),
                "GITHUB_WORKSPACE": str(self.workspace),
                "RUNNER_TEMP": str(self.temp),
                "NO_COLOR": "1",
            }
            env.update({k: substitute(str(v), ctx) for k, v in step.get("env", {}).items()})
            script = self.temp / f"{step_id}.sh"
            script.write_text(step["run"])
            assert step["shell"] == "bash"
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.workspace, env=env, capture_output=True, text=True, timeout=900,
            )
            result.ran.append(step_id)
            result.log += proc.stdout + proc.stderr
            outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
            result.steps[step_id] = outputs
            ctx["steps"][step_id] = {"outputs": outputs}
            if proc.returncode != 0:
                result.failed, result.exit_code = step_id, proc.returncode
                break
        result.outputs = {k: substitute(v["value"], ctx) for k, v in ACTION["outputs"].items()}
        return result


def test_metadata_is_a_composite_action() -> None:
    assert set(ACTION) <= {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
    assert ACTION["name"] and ACTION["description"]
    assert ACTION["runs"]["using"] == "composite"
    for name, spec in ACTION["inputs"].items():
        assert name == name.lower() and spec["description"], name
        assert isinstance(spec.get("default", ""), str), name
    for name, spec in ACTION["outputs"].items():
        assert spec["description"] and EXPRESSION.fullmatch(spec["value"]), name
    assert {"paths", "chart", "values", "cluster", "config", "fail-on"} <= set(ACTION["inputs"])
    assert {"sarif", "exit-code"} <= set(ACTION["outputs"])

    allowed = {"name", "id", "if", "shell", "run", "env", "working-directory", "continue-on-error", "uses", "with"}
    ids: set[str] = set()
    written: dict[str, set[str]] = {}
    used_inputs: set[str] = set()
    for step in ACTION["runs"]["steps"]:
        assert set(step) <= allowed, step
        if "run" in step:
            assert step["shell"] == "bash", "a run step of a composite action needs shell"
            assert "${{" not in step["run"], "inputs reach scripts through env, never as script text"
        written[step["id"]] = set(re.findall(r'echo "([\w-]+)=.*>> "\$GITHUB_OUTPUT"', step.get("run", "")))
        expressions = [*EXPRESSION.findall(json.dumps(step.get("env", {}))), step.get("if", "")]
        for expression in filter(None, expressions):
            for ref in re.findall(r"\b(?:inputs|steps)\.[\w.-]+", expression):
                parts = ref.split(".")
                if parts[0] == "inputs":
                    assert parts[1] in ACTION["inputs"], ref
                    used_inputs.add(parts[1])
                else:  # steps.ID.outputs.NAME of an earlier step that writes it
                    assert parts[1] in ids and parts[3] in written[parts[1]], ref
        ids.add(step["id"])
    for spec in ACTION["outputs"].values():
        _, step_id, _, name = EXPRESSION.fullmatch(spec["value"]).group(1).split(".")  # type: ignore[union-attr]
        assert name in written[step_id]
    assert used_inputs == set(ACTION["inputs"]), "every input is used"


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    base = tmp_path_factory.mktemp("action")
    checkout = snapshot_repo(base / "repo")  # `uses: ./` in this repository: action and workspace are one
    temp = base / "runner-temp"
    temp.mkdir()
    helm = tool("helm")
    return Runner(checkout, checkout, temp, [helm.parent])


@pytest.fixture(scope="module")
def installed(runner: Runner) -> dict[str, dict[str, str]]:
    """Run the install step once (the venv lives in RUNNER_TEMP); later runs reuse its output."""
    result = runner.run({"paths": "no-such-path"})
    assert "install" in result.ran and result.failed != "install", result.log
    return {"install": result.steps["install"]}


def _sarif(runner: Runner, result: Run) -> dict[str, Any]:
    path = runner.workspace / result.outputs["sarif"]
    sarif: dict[str, Any] = json.loads(path.read_text())
    return sarif


def _uris(sarif: dict[str, Any]) -> list[str]:
    return [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]]


def test_lints_paths_writes_sarif_and_fails(runner: Runner, installed: dict[str, dict[str, str]]) -> None:
    import jsonschema  # type: ignore[import-untyped]

    paths = "tests/fixtures/lint/pod-limit-missing.yaml\ntests/fixtures/lint/pod-good.yaml"
    result = runner.run({"paths": paths, "sarif": "out/findings.sarif"}, installed, skip=("install",))
    assert result.outputs == {"sarif": "out/findings.sarif", "exit-code": "1"}, result.log
    assert result.failed == "fail" and result.exit_code == 1  # the last step fails the job
    sarif = _sarif(runner, result)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    errors = {
        uri for uri, r in zip(_uris(sarif), sarif["runs"][0]["results"], strict=True) if r["level"] == "error"
    }
    assert errors == {"tests/fixtures/lint/pod-limit-missing.yaml"}
    assert "tests/fixtures/lint/pod-limit-missing.yaml:" in result.log  # the readable report in the log


def test_renders_the_chart_and_names_its_templates(runner: Runner, installed: dict[str, dict[str, str]]) -> None:
    values = runner.workspace / "ci" / "values-prod.yaml"
    values.parent.mkdir(exist_ok=True)
    values.write_text("gpuLimit: true\n")  # the trainer is fixed; the worker's request/limit mismatch stays
    config = runner.workspace / "ci" / "gpuguard.yaml"
    config.write_text("rules:\n  gpu-shared-memory: {severity: off}\n")
    result = runner.run(
        {"paths": "", "chart": "tests/fixtures/helm/gpuapp", "values": "ci/values-prod.yaml\n",
         "cluster": "sample", "config": "ci/gpuguard.yaml"},
        installed, skip=("install",),
    )
    assert result.outputs["exit-code"] == "1", result.log
    assert result.log.count("objects checked)") == 1  # one lint run: one summary line in the log
    sarif = _sarif(runner, result)
    uris = set(_uris(sarif))
    assert uris == {"tests/fixtures/helm/gpuapp/charts/worker/templates/worker.yaml"}
    assert all((runner.workspace / uri).is_file() for uri in uris)  # annotations attach to the repository's files
    rules = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert "gpu-request-limit-mismatch" in rules and "gpu-shared-memory" not in rules  # the config was used
    assert "no --cluster given" not in result.log  # the cluster input was used


def test_a_clean_run_passes(runner: Runner, installed: dict[str, dict[str, str]]) -> None:
    result = runner.run({"paths": "tests/fixtures/lint/pod-good.yaml"}, installed, skip=("install",))
    assert result.failed is None and result.outputs["exit-code"] == "0", result.log
    assert "fail" not in result.ran
    levels = {r["level"] for r in _sarif(runner, result)["runs"][0]["results"]}
    assert "error" not in levels  # warnings only: below the default fail-on


def test_a_repository_with_a_chart_and_a_kustomization_passes_at_the_defaults(
    runner: Runner, installed: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    """Issue: `paths: .` plus `chart:` gave exit 2 (the chart's raw templates are inside .), and
    the action linted twice.  Now the chart under `.` is rendered, and linted once."""
    workspace = tmp_path / "repo"
    chart = workspace / "charts" / "trainer"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: trainer\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("gpus: 1\n")
    (chart / "templates" / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n"
        "    spec:\n      restartPolicy: Never\n      containers:\n        - name: main\n"
        "          image: registry.example.com/train:1\n          resources:\n"
        "            limits: {nvidia.com/gpu: {{ .Values.gpus }}, memory: 8Gi}\n"
    )
    (workspace / "overlay").mkdir()
    (workspace / "overlay" / "kustomization.yaml").write_text("resources: [pod.yaml]\n")
    (workspace / "overlay" / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"
        "      image: registry.example.com/app:1\n"
    )
    (workspace / "README.md").write_text("not linted\n")
    kubectl = tool("kubectl")
    here = Runner(runner.action_path, workspace, runner.temp, [*runner.extra_path, kubectl.parent])
    result = here.run({"chart": "charts/trainer"}, installed, skip=("install",))
    assert result.failed is None and result.outputs["exit-code"] == "0", result.log
    assert "input error" not in result.log.replace("0 input errors", "")
    assert "(2 files, 2 documents, 2 objects checked)" in result.log  # the chart once, the overlay once


def test_an_old_python_is_refused(runner: Runner, tmp_path: Path) -> None:
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    result = runner.run({"python": str(fake)})
    assert result.failed == "install" and result.ran == ["install"]
    assert "is not Python 3.11 or newer" in result.log
