"""``gpuguard serve --audit-interval``: the audit runs on the webhook's live facts and publishes
PolicyReports through the (in-process) API server; reports follow the cluster as it changes."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from gpuguard.audit.policyreport import REPORT_NAME
from policies.config import Config
from tests.support.fake_apiserver import ALL_RESOURCES, FakeApiServer, api_client, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import FIXTURES, ROOT
from tests.support.reports import POLICYREPORT, validate_report
from tests.support.webhook_server import LOCAL_SANS, start_server, stop_server, wait_for
from webhook.configsource import StaticConfig
from webhook.live_facts import LiveFacts
from webhook.periodic_audit import PeriodicAudit, parse_interval

pytestmark = [pytest.mark.integration(POLICYREPORT)]

AUDIT = FIXTURES / "audit"
DEADLINE = 30.0
RESOURCE_OF = {"Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
               "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "PyTorchJob": "pytorchjobs",
               "Pod": "pods", "Node": "nodes", "RuntimeClass": "runtimeclasses"}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(ALL_RESOURCES)
    state.absent -= {"pytorchjobs", "policyreports", "clusterpolicyreports"}
    for name in ("workloads.yaml", "cluster-before.yaml"):
        for obj in yaml.safe_load((AUDIT / name).read_text())["items"]:
            state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        yield state


def client_factory(api: FakeApiServer) -> Callable[[], Any]:
    return lambda: api_client(api)


def reports(api: FakeApiServer) -> dict[str, dict[str, Any]]:
    with api.cond:
        return copy.deepcopy(api.objects["policyreports"])


def test_parse_interval() -> None:
    assert parse_interval("1h30m") == 5400 and parse_interval("90s") == 90 and parse_interval("2d") == 172800
    for bad in ("1 hour", "", "500ms", "-1h", "1h-"):
        with pytest.raises(ValueError):
            parse_interval(bad)


def test_reports_follow_the_cluster(api: FakeApiServer) -> None:
    live = LiveFacts(client_factory(api)).start()
    audit = PeriodicAudit(3600, live, StaticConfig(Config()), lambda: live.api_client).start()
    try:
        wait_for("the first audit", lambda: len(audit.runs) == 1, deadline=DEADLINE)
        (run,) = audit.runs
        assert run.error is None and run.published is not None and run.published.created == 5
        stored = reports(api)
        assert sorted(stored) == [f"{ns}/{REPORT_NAME}" for ns in ("inference", "ml-train", "notebooks", "research")]
        for report in stored.values():
            validate_report(report)
        assert stored[f"research/{REPORT_NAME}"]["summary"]["fail"] == 1  # mig-probe: no MIG slices anywhere

        # the cluster changes: h100-2 is repartitioned with MIG; the watch brings it into the live facts
        node = copy.deepcopy(api.objects["nodes"]["h100-2"])
        for part in ("allocatable", "capacity"):
            node["status"][part].pop("nvidia.com/gpu")
            node["status"][part]["nvidia.com/mig-1g.10gb"] = "56"
        api.put("nodes", node)
        wait_for("the MIG node in the facts", lambda: any(
            "nvidia.com/mig-1g.10gb" in n.allocatable for n in live.current().nodes), deadline=DEADLINE)
        again = audit.run_once()
        assert again.error is None and again.published is not None
        assert (again.published.updated, again.published.unchanged) == (1, 4)  # only research's report changed
        research = reports(api)[f"research/{REPORT_NAME}"]
        validate_report(research)
        assert research["summary"]["fail"] == 0
        assert [r["result"] for r in research["results"] if r["resources"][0]["name"] == "mig-probe"] == ["pass"]
    finally:
        audit.stop()
        live.stop()
    assert not audit.alive


def test_a_failing_run_is_logged_and_the_next_one_tries_again(api: FakeApiServer) -> None:
    api.forbidden.add("policyreports")  # listing the reports gpuguard made is refused
    live = LiveFacts(client_factory(api)).start()
    try:
        wait_for("live facts", lambda: live.ready, deadline=DEADLINE)
        broken = PeriodicAudit(3600, live, StaticConfig(Config()), lambda: (_ for _ in ()).throw(OSError("no route")))
        run = broken.run_once()
        assert run.error == "OSError: no route" and run.published is None
        audit = PeriodicAudit(3600, live, StaticConfig(Config()), lambda: live.api_client)
        run = audit.run_once()
        assert run.published is not None and run.published.created == 5
        assert run.published.errors and "cannot list existing policyreports" in run.published.errors[0]
    finally:
        live.stop()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)


def kubeconfig_for(api: FakeApiServer, path: Path) -> Path:
    return write_kubeconfig(path, f"http://127.0.0.1:{api.port}", token="t")


@pytest.mark.parametrize(("flag", "resource"), [([], "policyreports"), (["--audit-reports", "openreports"],
                                                                    "reports")])
def test_serve_publishes_reports_in_the_background(api: FakeApiServer, tmp_path: Path, bundle: Bundle,
                                                   flag: list[str], resource: str) -> None:
    api.absent -= {"reports", "clusterreports"}
    kubeconfig = kubeconfig_for(api, tmp_path / "kubeconfig")
    srv = start_server(tmp_path / "srv", bundle, "--kubeconfig", str(kubeconfig), "--audit-interval", "1h", *flag)
    try:
        wait_for("the reports", lambda: "periodic audit: 8 objects" in srv.log_text(), srv.log_text, DEADLINE)
        with srv.client() as client:
            assert client.get("/healthz").status_code == 200  # admission keeps being served
    finally:
        stop_server(srv)
    log = srv.log_text()
    assert "periodic audit: 8 objects, 7 GPU workloads, 4 findings" in log and "reports: 5 created" in log
    assert "cannot write report" not in log
    with api.cond:
        stored = copy.deepcopy(api.objects[resource])
        cluster = copy.deepcopy(api.objects[f"cluster{resource}"])
    assert sorted(stored) == [f"{ns}/{REPORT_NAME}" for ns in ("inference", "ml-train", "notebooks", "research")]
    assert list(cluster) == [REPORT_NAME]
    for report in [*stored.values(), *cluster.values()]:
        validate_report(report)


def test_an_audit_interval_needs_a_live_cluster(tmp_path: Path, bundle: Bundle) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuguard.cli", "serve", "--tls-cert", str(bundle.tls_crt), "--tls-key",
         str(bundle.tls_key), "--cluster", str(AUDIT / "cluster-before.yaml"), "--audit-interval", "1h"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2 and "--audit-interval lists the cluster's workloads" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "gpuguard.cli", "serve", "--tls-cert", str(bundle.tls_crt), "--tls-key",
         str(bundle.tls_key), "--kubeconfig", "k", "--audit-interval", "soon"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2 and "is not a duration" in done.stderr
