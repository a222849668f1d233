"""``gpuguard certs`` run again on its own out-dir (in the test process; in a child process where it must
run without the privileges that bypass file permissions): an existing CA is kept unless
``--force`` or ``--rotate`` asks otherwise, a rotation's caBundle trusts the serving certificates of
both CAs (checked with real TLS handshakes), and a run that exits 2 has written nothing."""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support.inprocess import gpuguard_here
from tests.support.paths import ROOT, load_yaml_docs
from tests.support.proc import Run, gpuguard

BASE = ["certs", "--service", "gpuguard", "--namespace", "gpuguard"]


def certs(out: Path, *extra: str, **kwargs: object) -> Run:
    if kwargs:  # process limits: a child process
        return gpuguard(*BASE, "--out-dir", str(out), *extra, **kwargs)  # type: ignore[arg-type]
    return gpuguard_here(*BASE, "--out-dir", str(out), *extra)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def injected(path: Path) -> list[bytes]:
    """The caBundles of every webhook in ``path``, decoded."""
    return [base64.b64decode(w["clientConfig"]["caBundle"]) for d in load_yaml_docs(path) for w in d["webhooks"]]


def handshake(tls_crt: Path, tls_key: Path, ca_bundle: bytes, hostname: str = "gpuguard.gpuguard.svc") -> None:
    """A TLS handshake in memory: the server presents tls_crt, the client trusts ca_bundle (PEM, one or
    more CAs), as the API server trusts a webhook configuration's caBundle."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tls_crt, tls_key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cadata=ca_bundle.decode())
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not complete")


@pytest.fixture
def first(tmp_path: Path) -> Path:
    """An out-dir after a first run, and deploy/webhooks.yaml injected from it (in tmp_path)."""
    shutil.copy(ROOT / "deploy" / "webhooks.yaml", tmp_path / "webhooks.yaml")
    out = tmp_path / "tls"
    run = certs(out, "--inject", str(tmp_path / "webhooks.yaml"))
    assert run.code == 0, run.stderr
    return out


def test_a_second_run_refuses_to_replace_the_ca(tmp_path: Path, first: Path) -> None:
    before, webhooks = snapshot(first), (tmp_path / "webhooks.yaml").read_bytes()
    run = certs(first, "--inject", str(tmp_path / "webhooks.yaml"))
    assert run.code == 2
    assert "already exist" in run.stderr and "--force" in run.stderr and "--rotate" in run.stderr
    assert f"--ca-cert {first / 'ca.crt'} --ca-key {first / 'ca.key'}" in run.stderr
    assert "Traceback" not in run.stderr
    assert snapshot(first) == before
    assert (tmp_path / "webhooks.yaml").read_bytes() == webhooks


def test_a_ca_certificate_alone_is_kept_too(tmp_path: Path, first: Path) -> None:
    (first / "ca.key").unlink()
    run = certs(first)
    assert run.code == 2
    assert f"{first / 'ca.crt'} already exists" in run.stderr


def test_renewal_with_the_same_ca_needs_no_flag(tmp_path: Path, first: Path) -> None:
    before = snapshot(first)
    run = certs(first, "--ca-cert", str(first / "ca.crt"), "--ca-key", str(first / "ca.key"),
                "--inject", str(tmp_path / "webhooks.yaml"))
    assert run.code == 0, run.stderr
    after = snapshot(first)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"]
    assert injected(tmp_path / "webhooks.yaml") == [before["ca.crt"]] * 2
    handshake(first / "tls.crt", first / "tls.key", before["ca.crt"])


def test_force_replaces_the_ca(tmp_path: Path, first: Path) -> None:
    old_ca = (first / "ca.crt").read_bytes()
    run = certs(first, "--force", "--inject", str(tmp_path / "webhooks.yaml"))
    assert run.code == 0, run.stderr
    new_ca = (first / "ca.crt").read_bytes()
    assert new_ca != old_ca
    assert injected(tmp_path / "webhooks.yaml") == [new_ca] * 2
    with pytest.raises(ssl.SSLCertVerificationError):  # what --force warns of: the old caBundle fails
        handshake(first / "tls.crt", first / "tls.key", old_ca)


@pytest.mark.slow  # several runs of gpuguard certs
def test_force_with_another_ca_drops_the_key_that_no_longer_matches(tmp_path: Path, first: Path) -> None:
    other = tmp_path / "corp"
    assert certs(other).code == 0
    run = certs(first, "--force", "--ca-cert", str(other / "ca.crt"), "--ca-key", str(other / "ca.key"))
    assert run.code == 0, run.stderr
    assert not (first / "ca.key").exists()
    assert (first / "ca.crt").read_bytes() == (other / "ca.crt").read_bytes()
    assert f"removed {first / 'ca.key'}" in run.stdout


@pytest.mark.slow  # several runs of gpuguard certs
def test_rotation_keeps_the_old_ca_until_the_renewal(tmp_path: Path, first: Path) -> None:
    webhooks = tmp_path / "webhooks.yaml"
    old = tmp_path / "old"
    shutil.copytree(first, old)  # the pair the replicas still serve during the rollout
    old_ca = (first / "ca.crt").read_bytes()

    run = certs(first, "--rotate", "--inject", str(webhooks))
    assert run.code == 0, run.stderr
    new_ca = (first / "ca.crt").read_bytes()
    bundle = (first / "ca-bundle.crt").read_bytes()
    assert new_ca != old_ca
    assert [c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(bundle)] == [
        new_ca, old_ca
    ]
    assert injected(webhooks) == [bundle] * 2
    assert "apply the webhook configurations first" in run.stdout
    # the injected caBundle trusts the old serving certificate and the new one
    handshake(old / "tls.crt", old / "tls.key", bundle)
    handshake(first / "tls.crt", first / "tls.key", bundle)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(first / "tls.crt", first / "tls.key", old_ca)

    # the renewal with the new CA ends the rotation: the old CA leaves the bundle
    run = certs(first, "--ca-cert", str(first / "ca.crt"), "--ca-key", str(first / "ca.key"),
                "--inject", str(webhooks))
    assert run.code == 0, run.stderr
    assert not (first / "ca-bundle.crt").exists()
    assert f"removed {first / 'ca-bundle.crt'}" in run.stdout
    assert injected(webhooks) == [new_ca] * 2
    handshake(first / "tls.crt", first / "tls.key", new_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(old / "tls.crt", old / "tls.key", new_ca)


@pytest.mark.slow  # several runs of gpuguard certs
def test_rotating_again_mid_rotation_keeps_every_ca_still_trusted(tmp_path: Path, first: Path) -> None:
    ca0 = (first / "ca.crt").read_bytes()
    assert certs(first, "--rotate").code == 0
    ca1 = (first / "ca.crt").read_bytes()
    assert certs(first, "--rotate").code == 0
    ca2 = (first / "ca.crt").read_bytes()
    chain = x509.load_pem_x509_certificates((first / "ca-bundle.crt").read_bytes())
    assert chain == [x509.load_pem_x509_certificate(c) for c in (ca2, ca1, ca0)]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rotate"], "no CA in"),
        (["--rotate", "--force"], "not allowed with argument"),
        (["--rotate", "--ca-cert", "x.crt", "--ca-key", "x.key"], "--rotate makes a new CA"),
    ],
)
def test_rotation_usage_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    run = certs(tmp_path / "empty", *extra)
    assert run.code == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "empty").exists()


def test_inject_without_webhook_configurations_writes_nothing(tmp_path: Path) -> None:
    service = tmp_path / "service.yaml"
    service.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: gpuguard}\n")
    good = tmp_path / "webhooks.yaml"
    shutil.copy(ROOT / "deploy" / "webhooks.yaml", good)
    before = good.read_bytes()
    run = certs(tmp_path / "tls", "--inject", str(good), str(service))
    assert run.code == 2
    assert f"{service}: no ValidatingWebhookConfiguration or MutatingWebhookConfiguration" in run.stderr
    assert not (tmp_path / "tls").exists()  # checked before any certificate was written
    assert good.read_bytes() == before  # nor was the good file touched


def test_inject_writes_atomically_keeping_mode_and_link(tmp_path: Path, first: Path) -> None:
    real = tmp_path / "manifests" / "webhooks.yaml"
    real.parent.mkdir()
    shutil.copy(ROOT / "deploy" / "webhooks.yaml", real)
    real.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    run = certs(first, "--ca-cert", str(first / "ca.crt"), "--ca-key", str(first / "ca.key"), "--inject", str(link))
    assert run.code == 0, run.stderr
    assert link.is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert injected(real) == [(first / "ca.crt").read_bytes()] * 2
    assert sorted(p.name for p in real.parent.iterdir()) == ["webhooks.yaml"]  # no temporary file left


def test_an_unwritable_inject_file_is_left_whole(tmp_path: Path, first: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "webhooks.yaml"
    shutil.copy(ROOT / "deploy" / "webhooks.yaml", target)
    before = target.read_bytes()
    folder.chmod(0o555)  # no temporary file can be made beside it
    try:
        run = certs(first, "--ca-cert", str(first / "ca.crt"), "--ca-key", str(first / "ca.key"),
                    "--inject", str(target), drop_dac=True)
    finally:
        folder.chmod(0o755)
    assert run.code == 2
    assert f"cannot write {target}" in run.stderr and "Traceback" not in run.stderr
    assert target.read_bytes() == before
    assert os.listdir(folder) == ["webhooks.yaml"]
