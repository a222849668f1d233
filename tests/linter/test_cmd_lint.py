"""gpuguard lint end to end: output formats, exit codes, Helm stdin, facts-needing rules."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from gpuguard.terminal import use_colour
from linter import cmd_lint
from linter.formats import github, text
from linter.lint import lint_text
from linter.report import Report
from policies import ClusterFacts
from policies.registry import RULES, WORKLOAD_RULES
from tests.support.lint import line_of, only_rules, run_lint
from tests.support.paths import FIXTURES, SARIF_SCHEMA

LINT = FIXTURES / "lint"

GPU_REQUEST = "/spec/containers/0/resources/requests/nvidia.com~1gpu"


def test_json_shape_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = LINT / "pod-limit-missing.yaml"
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, _ = run_lint([str(manifest), "--config", config, "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert code == 1
    assert set(report) == {"findings", "errors", "summary"}
    assert report["errors"] == []
    (finding,) = report["findings"]
    assert set(finding) == {
        "rule", "severity", "message", "remediation", "file", "line", "column",
        "kind", "name", "namespace", "path", "source", "fix",
    }
    assert finding["rule"] == "gpu-limit-missing"
    assert finding["severity"] == "error"
    assert (finding["line"], finding["column"]) == line_of(manifest.read_text(), "nvidia.com/gpu: 1")
    assert (finding["kind"], finding["name"], finding["namespace"]) == ("Pod", "trainer", "ml")
    assert finding["path"] == GPU_REQUEST
    assert finding["source"] is None
    assert finding["file"] == str(manifest)
    assert finding["fix"] == [
        {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"nvidia.com/gpu": 1}}
    ]
    summary = report["summary"]
    assert summary["by_severity"] == {"error": 1, "warning": 0, "info": 0}
    assert (summary["files"], summary["documents"], summary["objects"]) == (1, 1, 1)


@pytest.mark.parametrize(
    ("manifest", "extra", "expected"),
    [
        ("pod-good.yaml", [], 0),
        ("pod-limit-missing.yaml", [], 1),
        ("pod-limit-missing.yaml", ["--fail-on", "info"], 1),
    ],
)
def test_exit_code_follows_findings(
    manifest: str, extra: list[str], expected: int, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, _, _ = run_lint([str(LINT / manifest), "--config", config, *extra], capsys, monkeypatch)
    assert code == expected


@pytest.mark.parametrize(("fail_on", "expected"), [("error", 0), ("warning", 1), ("info", 1)])
def test_fail_on_threshold(
    fail_on: str, expected: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = only_rules(tmp_path, "gpu-limit-missing", gpu_limit_missing="warning")
    argv = [str(LINT / "pod-limit-missing.yaml"), "--config", config, "--fail-on", fail_on, "--format", "json"]
    code, out, _ = run_lint(argv, capsys, monkeypatch)
    assert [f["severity"] for f in json.loads(out)["findings"]] == ["warning"]
    assert code == expected


def test_unreadable_input_exits_2_but_others_are_linted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = only_rules(tmp_path, "gpu-limit-missing")
    missing = str(tmp_path / "nope.yaml")
    argv = [missing, str(LINT / "pod-limit-missing.yaml"), "--config", config, "--format", "json"]
    code, out, _ = run_lint(argv, capsys, monkeypatch)
    report = json.loads(out)
    assert code == 2
    assert [e["file"] for e in report["errors"]] == [missing]
    assert [f["rule"] for f in report["findings"]] == ["gpu-limit-missing"]


@pytest.mark.parametrize(
    ("content", "flag"),
    [
        ("rules: {no-such-rule: off}\n", "--config"),
        ("rules: [1, 2]\n", "--config"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "--cluster"),
        ("key: [broken\n", "--cluster"),
    ],
)
def test_bad_config_or_cluster_exits_2(
    content: str, flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    code, out, err = run_lint([str(LINT / "pod-good.yaml"), flag, str(bad)], capsys, monkeypatch)
    assert code == 2
    assert str(bad) in err
    assert out == ""


def test_bad_usage_exits_2() -> None:
    parser = argparse.ArgumentParser()
    cmd_lint.add_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["x.yaml", "--format", "xml"])
    assert exc.value.code == 2


def test_config_found_upward_from_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".gpuguard.yaml").write_text("rules:\n  gpu-limit-missing: off\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    code, out, _ = run_lint([str(LINT / "pod-limit-missing.yaml"), "--format", "json"], capsys, monkeypatch)
    assert "gpu-limit-missing" not in {f["rule"] for f in json.loads(out)["findings"]}
    monkeypatch.chdir(tmp_path.parent)
    code, out, _ = run_lint([str(LINT / "pod-limit-missing.yaml"), "--format", "json"], capsys, monkeypatch)
    assert "gpu-limit-missing" in {f["rule"] for f in json.loads(out)["findings"]}
    assert code == 1


def test_fact_rules_skipped_without_cluster(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the whole-job rules are said skipped only where there is a job to judge (a Pod is none)
    fact_rules = sorted(rid for rid, m in RULES.items() if m.NEEDS_FACTS == "yes" and rid not in WORKLOAD_RULES)
    manifest = str(LINT / "pod-limit-missing.yaml")
    _, out, _ = run_lint([manifest, "--format", "json"], capsys, monkeypatch)
    summary = json.loads(out)["summary"]
    assert summary["skipped_rules"] == fact_rules
    assert summary["cluster"] is None
    _, out, _ = run_lint([manifest], capsys, monkeypatch)
    if fact_rules:
        assert "no --cluster given" in out and fact_rules[0] in out
    _, out, _ = run_lint([manifest, "--cluster", "sample", "--format", "json"], capsys, monkeypatch)
    summary = json.loads(out)["summary"]
    assert summary["skipped_rules"] == []
    assert summary["cluster"] == "sample"


def test_helm_output_on_stdin_reports_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = (LINT / "helm-rendered.yaml").read_bytes()
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, _ = run_lint(["-", "--config", config, "--format", "json"], capsys, monkeypatch, stdin=rendered)
    findings = json.loads(out)["findings"]
    assert code == 1
    assert [(f["file"], f["source"], f["kind"]) for f in findings] == [
        ("<stdin>", "gpu-app/templates/deployment.yaml", "Deployment"),
        ("<stdin>", "gpu-app/templates/job.yaml", "Job"),
    ]
    text_ = rendered.decode()
    assert (findings[0]["line"], findings[0]["column"]) == line_of(text_, "nvidia.com/gpu: 1")
    assert (findings[1]["line"], findings[1]["column"]) == line_of(text_, "amd.com/gpu: 1")
    _, out, _ = run_lint(["-", "--config", config], capsys, monkeypatch, stdin=rendered)
    # Text names the templates as the other formats do, with the position in the rendered stream.
    assert "gpu-app/templates/deployment.yaml:" in out and "gpu-app/templates/job.yaml:" in out
    assert "<stdin> line " in out and "<stdin>:" not in out


def test_list_items_get_item_pointers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = LINT / "list.yaml"
    config = only_rules(tmp_path, "gpu-limit-missing")
    _, out, _ = run_lint([str(manifest), "--config", config, "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    (finding,) = report["findings"]
    assert finding["path"] == "/items/1" + GPU_REQUEST
    assert finding["name"] == "listed-bad"
    assert finding["fix"][0]["path"].startswith("/items/1/")
    assert (finding["line"], finding["column"]) == line_of(manifest.read_text(), "nvidia.com/gpu: 1")
    assert report["summary"]["objects"] == 2


def test_sarif_validates_and_has_exact_regions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema  # type: ignore[import-untyped]

    config = only_rules(tmp_path, "gpu-limit-missing")
    inputs = [
        str(LINT / "multi-doc.yaml"),
        str(LINT / "pod-limit-missing.yaml"),
        str(LINT / "bad-inputs" / "broken.yaml"),
    ]
    monkeypatch.chdir(LINT.parent.parent.parent)
    _, out, _ = run_lint([*inputs, "--config", config, "--format", "sarif"], capsys, monkeypatch)
    sarif = json.loads(out)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    _, out, _ = run_lint([*inputs, "--config", config, "--format", "json"], capsys, monkeypatch)
    plain = json.loads(out)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES)
    for r in rules:
        module = RULES[r["id"]]
        assert r["shortDescription"]["text"] == module.SUMMARY
        assert r["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert r["fullDescription"]["text"]
        assert r["helpUri"].endswith(f"/README.md#rule-{r['id']}") and r["help"]["markdown"]  # tests/gpuguard/test_sarif.py
    regions = [
        (
            res["ruleId"],
            res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            res["locations"][0]["physicalLocation"]["region"]["startLine"],
            res["locations"][0]["physicalLocation"]["region"]["startColumn"],
        )
        for res in run["results"]
    ]
    root = LINT.parent.parent.parent.resolve()
    expected = [
        (f["rule"], Path(f["file"]).resolve().relative_to(root).as_posix(), f["line"], f["column"])
        for f in plain["findings"]
    ]
    assert regions == expected
    assert len(regions) == 2
    assert run["tool"]["driver"]["rules"][run["results"][0]["ruleIndex"]]["id"] == run["results"][0]["ruleId"]
    (notification,) = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("broken.yaml")
    assert run["invocations"][0]["executionSuccessful"] is False


def test_github_escaping() -> None:
    assert github.escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = github.command("error", "bad: 50%\nsee x", file="dir,1/a:b.yaml", line=3, col=4, title="r")
    assert line == "::error file=dir%2C1/a%3Ab.yaml,line=3,col=4,title=r::bad: 50%25%0Asee x"


def test_github_format(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config = only_rules(tmp_path, "gpu-limit-missing", gpu_limit_missing="info")
    manifest = LINT / "pod-limit-missing.yaml"
    broken = LINT / "bad-inputs" / "broken.yaml"
    _, out, _ = run_lint([str(manifest), str(broken), "--config", config, "--format", "github"], capsys, monkeypatch)
    line, col = line_of(manifest.read_text(), "nvidia.com/gpu: 1")
    commands = [c for c in out.splitlines() if c.startswith("::")]
    assert commands[0].startswith(f"::notice file={manifest},line={line},col={col},title=gpu-limit-missing::container ")
    assert any(c.startswith(f"::error file={broken},line=8,") for c in commands)


def test_text_format_caret_and_colour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = LINT / "pod-limit-missing.yaml"
    config = only_rules(tmp_path, "gpu-limit-missing")
    _, out, _ = run_lint([str(manifest), "--config", config], capsys, monkeypatch)
    line, col = line_of(manifest.read_text(), "nvidia.com/gpu: 1")
    lines = out.splitlines()
    expected_head = f"{manifest}:{line}:{col} error gpu-limit-missing "
    head = next(i for i, text_ in enumerate(lines) if text_.startswith(expected_head))
    source, caret = lines[head + 1], lines[head + 2]
    assert source.endswith(manifest.read_text().splitlines()[line - 1])
    assert caret.index("^") == source.index("|") + 2 + col - 1
    assert "\x1b[" not in out  # not a terminal
    assert lines[-1].startswith("1 error, 0 warnings, 0 info")

    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour(tty) is False
    monkeypatch.delenv("NO_COLOR")
    assert use_colour(tty) is True
    result = lint_text(manifest.read_text(), str(manifest), load_config({"rules": {}}), ClusterFacts.empty())
    text.render(Report(results=[result]), tty)
    assert "\x1b[31merror\x1b[0m" in tty.getvalue()


def test_directories_are_searched_recursively(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = (LINT / "pod-limit-missing.yaml").read_text()
    tree = tmp_path / "tree"
    for rel in ("a.yaml", "sub/b.yml", "sub/deeper/c.json", "notes.txt", ".hidden/d.yaml"):
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(yaml.safe_load(bad)) if rel.endswith(".json") else bad)
    config = only_rules(tmp_path, "gpu-limit-missing")
    _, out, _ = run_lint([str(tree), "--config", config, "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert sorted(Path(f["file"]).relative_to(tree).as_posix() for f in report["findings"]) == [
        "a.yaml", "sub/b.yml", "sub/deeper/c.json",
    ]
    assert report["summary"]["files"] == 3


def test_a_template_that_is_no_object_is_an_input_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Pod whose spec is a list, or a Deployment whose template is a string, was "checked" with
    nothing found and exit 0; the API server rejects both, and gpuguard says it cannot check them."""
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n- 1\n---\n"
        "apiVersion: apps/v1\nkind: List\nitems:\n"
        "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d}\n  spec:\n    template: gpus\n"
    )
    code, out, _ = run_lint([str(manifest), "--format", "json"], capsys, monkeypatch)
    assert code == 2
    errors = [(e["line"], e["message"]) for e in json.loads(out)["errors"]]
    assert errors == [
        (4, "spec is a list, but a Pod holds a pod template or spec (an object) there: gpuguard cannot check it"),
        (14, "items[0].spec.template is a string, but a Deployment holds a pod template or spec (an object) there: "
             "gpuguard cannot check it"),
    ]


# --- the first hour: messages a new user meets (issue "paper cuts") ------------------------------

IGNORE_TYPO = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    gpuguard.io/ignore: "gpu-limit-missin, gpu-taint-not-tolerated"
spec:
  containers:
    - name: c
      image: nvcr.io/nvidia/pytorch:24.05-py3
      resources:
        requests:
          nvidia.com/gpu: 1
"""
IGNORE_MESSAGE = "gpuguard.io/ignore names no rule: gpu-limit-missin (did you mean gpu-limit-missing?)"


def test_a_misspelled_ignore_id_is_an_input_error_at_its_line(tmp_path: Path) -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    path = tmp_path / "pod.yaml"
    path.write_text(IGNORE_TYPO)
    done = gpuguard("lint", str(path))
    assert done.code == 2
    assert f"{path}:6: input error: {IGNORE_MESSAGE}\n" in done.stdout
    assert done.stdout.count("gpu-limit-missin ") == 1  # said once; the rule it meant still runs
    assert "error gpu-limit-missing" in done.stdout
    report = json.loads(gpuguard_here("lint", str(path), "--format", "json").stdout)
    assert report["errors"] == [{"file": str(path), "line": 6, "message": IGNORE_MESSAGE}]


def test_a_missing_file_has_no_line_in_any_format(tmp_path: Path) -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    missing = tmp_path / "nofile.yaml"
    message = f"cannot read {missing}: No such file or directory"
    done = gpuguard("lint", str(missing))
    assert done.code == 2 and done.stdout.startswith(f"input error: {message}\n")
    assert ":0" not in done.stdout
    report = json.loads(gpuguard_here("lint", str(missing), "--format", "json").stdout)
    assert report["errors"] == [{"file": str(missing), "line": None, "message": message}]
    annotations = gpuguard_here("lint", str(missing), "--format", "github").stdout.splitlines()
    # A workflow command with a file and no line annotates the file: "can associate the message with
    # a particular file in your repository. Optionally, your message can specify a position within
    # the file" (GitHub docs, "Workflow commands for GitHub Actions", error message).
    assert annotations[0] == f"::error file={github.escape_property(str(missing))},title=gpuguard input error::{message}"
    sarif = json.loads(gpuguard_here("lint", str(missing), "--format", "sarif").stdout)
    import jsonschema  # type: ignore[import-untyped]

    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    (note,) = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"] == message
    assert "region" not in note["locations"][0]["physicalLocation"]


def test_a_near_miss_of_the_sample_cluster_is_suggested(tmp_path: Path) -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    path = tmp_path / "pod.yaml"
    path.write_text(IGNORE_TYPO)
    done = gpuguard("lint", str(path), "--cluster", "Sample")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr == ("gpuguard lint: cannot read Sample: No such file or directory; did you mean sample "
                           "(the sample cluster gpuguard ships)?\n")
    other = gpuguard_here("lint", str(path), "--cluster", str(tmp_path / "cluster.yaml"))
    assert other.code == 2 and "did you mean" not in other.stderr


def test_cuda_notes_are_sentences_of_their_own_in_text_and_sarif(tmp_path: Path) -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    path = tmp_path / "pod.yaml"
    path.write_text(IGNORE_TYPO.replace("gpu-limit-missin, ", ""))
    done = gpuguard("lint", str(path), "--cluster", "sample")
    assert "driver 470.256.02. Note: NGC framework images set NVIDIA_REQUIRE_CUDA" in done.stdout
    assert "02 Note:" not in done.stdout
    sarif = json.loads(gpuguard_here("lint", str(path), "--cluster", "sample", "--format", "sarif").stdout)
    (cuda,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "gpu-cuda-driver-mismatch"]
    assert ". Note: NGC framework images" in cuda["message"]["text"]


def test_github_summary_counts_with_the_plural_helper(tmp_path: Path) -> None:
    from tests.support.proc import gpuguard

    path = tmp_path / "pod.yaml"
    path.write_text(IGNORE_TYPO.replace("gpu-limit-missin, gpu-taint-not-tolerated", "gpu-memory-limit-missing"))
    done = gpuguard("lint", str(path), "--format", "github")
    assert done.stdout.splitlines()[-1] == "gpuguard: 1 error, 0 warnings, 0 info"


MIXED_CLUSTER = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"


def _gpu_pods(n: int) -> str:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml"}, "spec": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "main", "image": "ubuntu:22.04", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
    }}
    return "---\n".join(yaml.safe_dump({**pod, "metadata": {"namespace": "ml", "name": f"p{i}"}}) for i in range(n))


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_a_node_serving_gpus_both_ways_is_said_once_not_per_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(_gpu_pods(12))
    code, out, err = run_lint([str(manifest), "--cluster", str(MIXED_CLUSTER), "--format", fmt], capsys, monkeypatch)
    note = "cluster: gpu-dra-mixed-allocation on node mixed-l4-0: nvidia.com/gpu is advertised through the device plugin"
    assert (out + err).count(note) == 1, out + err
    assert code == 0  # infos only: the nodes are not the manifests' fault
    if fmt == "json":
        report = json.loads(out)
        mixed = [f for f in report["findings"] if f["rule"] == "gpu-dra-mixed-allocation"]
        # each pod hears what the node means for it, as an info; no warning repeats the node's problem
        assert len(mixed) == 12 and {f["severity"] for f in mixed} == {"info"}
        assert all("1 of the 3 nodes it may land on" in f["message"] for f in mixed)
        assert report["summary"]["by_severity"]["warning"] == 0


def test_a_disabled_cluster_rule_says_nothing_about_the_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(_gpu_pods(1))
    argv = [str(manifest), "--cluster", str(MIXED_CLUSTER), "--disable", "gpu-dra-mixed-allocation"]
    _, out, err = run_lint(argv, capsys, monkeypatch)
    assert "gpu-dra-mixed-allocation" not in out + err


def test_kserve_runtimes_in_the_same_run_count_and_fix_adds_no_redundant_volume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.paths import CORPUS

    nim = "NVIDIA__nim-deploy__kserve__nim-models__llama3-70b-instruct_4xh100_1.0.0.yaml"
    llm = ("kserve__kserve__docs__samples__llmisvc__dp-ep__deepseek-r1-gpu-rdma-roce__"
           "llm-inference-service-dp-ep-deepseek-r1-gpu-naive.yaml")
    models, runtimes = tmp_path / "models", tmp_path / "runtimes"
    models.mkdir()
    runtimes.mkdir()
    for name in (nim, llm):
        (models / name).write_text((CORPUS / "real" / name).read_text())
    runtime = CORPUS / "kserve" / "NVIDIA__nim-deploy__kserve__runtimes__llama3-70b-instruct-1.0.0.yaml"
    (runtimes / runtime.name).write_text(runtime.read_text())
    before = {p: p.read_text() for p in models.iterdir()}
    # alone, the InferenceService's runtime is unseen: an info; the LLMInferenceService has KServe's presets
    _, out, _ = run_lint([str(models), "--format", "json"], capsys, monkeypatch)
    shm = [f for f in json.loads(out)["findings"] if f["rule"] == "gpu-shared-memory"]
    assert [(Path(f["file"]).name, f["severity"]) for f in shm] == [(nim, "info")]
    # with the runtime in the run (another directory), nothing; --fix changes no file
    _, out, _ = run_lint([str(models), str(runtimes), "--format", "json"], capsys, monkeypatch)
    assert not [f for f in json.loads(out)["findings"] if f["rule"] == "gpu-shared-memory"]
    run_lint([str(models), str(runtimes), "--fix"], capsys, monkeypatch)
    assert {p: p.read_text() for p in models.iterdir()} == before


def test_kserve_runtimes_in_the_cluster_snapshot_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.paths import CORPUS, EXAMPLES

    snapshot = tmp_path / "cluster.yaml"
    runtime = CORPUS / "kserve" / "NVIDIA__nim-deploy__kserve__runtimes__mixtral-8x22b-instruct-v01-1.0.0.yaml"
    snapshot.write_text((EXAMPLES / "cluster.yaml").read_text() + "---\n" + runtime.read_text())
    isvc = CORPUS / "real" / "NVIDIA__nim-deploy__kserve__nim-models__mixtral-8x22b-instruct-v01_8xgpu_1.0.0.yaml"
    _, out, _ = run_lint([str(isvc), "--cluster", str(snapshot), "--format", "json"], capsys, monkeypatch)
    assert not [f for f in json.loads(out)["findings"] if f["rule"] == "gpu-shared-memory"]
GPU_POD = """apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
  - name: train
    image: nvidia/cuda:12.8.0-base-ubuntu24.04
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_the_platform_the_nodes_show_is_said_in_the_summary(tmp_path: Path) -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD)
    eks = gpuguard("lint", str(pod), "--cluster", str(FIXTURES / "clusters" / "eks.yaml"))
    assert eks.code == 0, eks.stdout + eks.stderr
    assert ("note: cluster: ExtendedResourceToleration detected: EKS runs it (node label "
            "eks.amazonaws.com/nodegroup)") in eks.stdout + eks.stderr
    summary = json.loads(gpuguard_here("lint", str(pod), "--cluster", str(FIXTURES / "clusters" / "eks.yaml"),
                                  "--format", "json").stdout)["summary"]
    assert summary["extended_resource_toleration"] == "detected: EKS runs it (node label eks.amazonaws.com/nodegroup)"
    # A platform that does not run it is named too, with what that means for GPU pods.
    cluster = yaml.safe_load((FIXTURES / "clusters" / "eks.yaml").read_text())
    for item in cluster["items"]:
        item["metadata"]["labels"] = {k: v for k, v in item["metadata"]["labels"].items()
                                      if not k.startswith("eks.amazonaws.com/")}
        item["metadata"]["labels"]["node.openshift.io/os_id"] = "rhcos"
    ocp = tmp_path / "ocp.yaml"
    ocp.write_text(yaml.safe_dump(cluster))
    done = gpuguard("lint", str(pod), "--cluster", str(ocp))
    assert done.code == 1
    assert ("note: cluster: OpenShift detected (node label node.openshift.io/os_id): it does not run "
            "ExtendedResourceToleration") in done.stdout + done.stderr
    assert "gpu-taint-not-tolerated" in done.stdout
