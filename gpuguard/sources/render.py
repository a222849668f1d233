"""Helm charts and kustomize directories, rendered by the real tools before they are linted.

A directory holding ``Chart.yaml`` is a Helm chart: its templates are no manifests until
``helm template`` renders them.  A directory holding ``kustomization.yaml`` (``.yml``, or
``Kustomization``) is a kustomization: its resources are only half the story until ``kubectl
kustomize`` (or ``kustomize build``) applies its patches.  Either is read as the text the tool
prints; the files inside are not linted raw again.

The tool runs without a shell, with a timeout and a cap on what it prints (the same cap as any
input).  A tool that is missing, fails or times out is an input error that says why and prints
the command to run by hand (``helm template DIR | gpuguard lint - --helm-chart DIR``); a chart
whose dependencies are not vendored (``charts/``) names ``helm dependency build DIR``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError

Tool = Literal["helm", "kustomize"]
CHART_FILE = "Chart.yaml"
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
TIMEOUT_SECONDS = 120.0


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a directory that cannot be searched: the walk reports it
        return False


def rendered_by(directory: Path) -> Tool | None:
    """Which tool renders ``directory``, if it is a chart or a kustomization."""
    if _is_file(directory / CHART_FILE):
        return "helm"
    if any(_is_file(directory / name) for name in KUSTOMIZATION_FILES):
        return "kustomize"
    return None


def enclosing(path: Path, stop: Path | None = None) -> tuple[Path, Tool] | None:
    """The chart or kustomization a file lies in (the nearest ancestor that is one), looking no
    higher than ``stop`` (default: the working directory, or the file's root when outside it)."""
    here = path.resolve().parent
    limit = (stop or Path.cwd()).resolve()
    while True:
        tool = rendered_by(here)
        if tool is not None:
            return here, tool
        if here == limit or here.parent == here or not here.is_relative_to(limit):
            return None
        here = here.parent


@dataclass(frozen=True, slots=True)
class RenderOptions:
    helm: str | None = None  # the helm binary (default: helm on PATH)
    kubectl: str | None = None  # the kubectl binary (default: kubectl, else kustomize, on PATH)
    values: tuple[str, ...] = ()  # --helm-values files
    sets: tuple[str, ...] = ()  # --helm-set K=V
    release: str = "release-name"  # helm template's own default name
    namespace: str | None = None
    environment: dict[str, str] = field(default_factory=dict)  # extra variables for the tools (tests)


def _by_hand(tool: Tool, directory: str, options: RenderOptions) -> str:
    if tool == "helm":
        extra = "".join(f" --values {shlex.quote(v)}" for v in options.values)
        extra += "".join(f" --set {shlex.quote(s)}" for s in options.sets)
        extra += f" --namespace {shlex.quote(options.namespace)}" if options.namespace else ""
        quoted = shlex.quote(directory)
        return (f"helm template {shlex.quote(options.release)} {quoted}{extra} | "
                f"gpuguard lint - --helm-chart {quoted}")
    return f"kubectl kustomize {shlex.quote(directory)} | gpuguard lint -"


def command(tool: Tool, directory: str, options: RenderOptions) -> list[str] | None:
    """The argument vector that renders ``directory``, or None when no binary is found."""
    if tool == "helm":
        helm = options.helm or shutil.which("helm")
        if helm is None:
            return None
        argv = [helm, "template", options.release, directory]
        for values in options.values:
            argv += ["--values", values]
        for assignment in options.sets:
            argv += ["--set", assignment]
        if options.namespace:
            argv += ["--namespace", options.namespace]
        return argv
    kubectl = options.kubectl or shutil.which("kubectl")
    if kubectl is not None:
        return [kubectl, "kustomize", directory]
    kustomize = shutil.which("kustomize")
    return [kustomize, "build", directory] if kustomize is not None else None


def render(tool: Tool, directory: str, options: RenderOptions) -> str:
    """The manifests ``tool`` renders from ``directory``; InputError (at the chart's or the
    kustomization's file) when it cannot."""
    where = str(Path(directory) / (CHART_FILE if tool == "helm" else _kustomization_file(Path(directory))))
    argv = command(tool, directory, options)
    name = "helm" if tool == "helm" else "kubectl (or kustomize)"
    if argv is None:
        flag = "--helm PATH" if tool == "helm" else "--kubectl PATH"
        raise InputError(where, 0, f"{'a Helm chart' if tool == 'helm' else 'a kustomization'}, and {name} is not on "
                                   f"PATH ({flag} names it); render it yourself: {_by_hand(tool, directory, options)}")
    env = {**os.environ, **options.environment}
    try:
        done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT_SECONDS, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise InputError(where, 0, f"{argv[0]} took over {TIMEOUT_SECONDS:.0f} s to render it; render it "
                                   f"yourself: {_by_hand(tool, directory, options)}") from None
    except OSError as exc:
        raise InputError(where, 0, f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = " ".join(line.strip() for line in detail[-3:])[:400] or f"exit status {done.returncode}"
        hint = ""
        if tool == "helm" and ("missing in charts/" in reason or "dependencies" in reason.lower()):
            hint = f"; vendor its dependencies first: helm dependency build {shlex.quote(directory)}"
        raise InputError(where, 0, f"{Path(argv[0]).name} {argv[1]} failed: {reason}{hint}")
    if len(done.stdout) > MAX_FILE_BYTES:
        raise InputError(where, 0, f"renders over {MAX_FILE_BYTES // 1048576} MiB; gpuguard reads at most that "
                                   "per input")
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(where, 0, f"{argv[0]} printed text that is not UTF-8") from None


def _kustomization_file(directory: Path) -> str:
    return next((n for n in KUSTOMIZATION_FILES if _is_file(directory / n)), KUSTOMIZATION_FILES[0])
