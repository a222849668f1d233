"""A CA and a serving certificate for the webhook Service, written as PEM files.

The API server dials ``https://NAME.NS.svc:443`` and checks the serving certificate against the
``caBundle`` of the webhook configuration; it verifies the hostname against the SANs only (the
common name is ignored since Go 1.15), so every DNS form of the Service name is listed.

An out-dir that already holds a CA is not overwritten unless asked: a new CA invalidates the
``caBundle`` already injected into the webhook configurations, and the API server then fails every
call.  ``existing="force"`` replaces it; ``existing="rotate"`` makes a new CA and writes
``ca-bundle.crt`` with the new CA first and the CAs trusted until now after it, so a caBundle made
from it trusts the serving certificates of both while the new one is rolled out.  The next run that
signs with the CA of the out-dir (a renewal) ends the rotation: ``ca-bundle.crt`` is removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
CA_BUNDLE = "ca-bundle.crt"  # during a rotation: the new CA, then the ones trusted before it

Existing = Literal["refuse", "force", "rotate"]

# Back-date notBefore a little so that a node whose clock lags does not reject a fresh cert.
CLOCK_SKEW = dt.timedelta(minutes=5)

SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class CertError(ValueError):
    """A problem with inputs (CA files, SANs, validity); the message says which and why."""


@dataclass(frozen=True, slots=True)
class Bundle:
    ca_crt: Path
    tls_crt: Path
    tls_key: Path
    # What a caBundle must hold: ca.crt, or during a rotation ca-bundle.crt (new CA and old ones).
    trust: Path | None = None
    removed: tuple[Path, ...] = ()  # files of an earlier run that no longer apply (a finished rotation)

    @property
    def ca_bundle(self) -> Path:
        return self.trust or self.ca_crt


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _san_entries(names: Sequence[str]) -> list[x509.GeneralName]:
    entries: list[x509.GeneralName] = []
    seen: set[str] = set()
    for raw in names:
        name = raw.strip()
        if not name:
            raise CertError("empty subject alternative name")
        if name in seen:
            continue
        seen.add(name)
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            try:
                entries.append(x509.DNSName(name))
            except (ValueError, UnicodeError) as exc:
                raise CertError(f"invalid subject alternative name {name!r}: {exc}") from None
    return entries


def _ca_files(out_dir: Path) -> list[Path]:
    return [path for path in (out_dir / CA_KEY, out_dir / CA_CERT) if path.exists()]


def _same_certificate(path: Path, cert: x509.Certificate) -> bool:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes()) == cert
    except (OSError, ValueError):
        return False


def _trusted_before(out_dir: Path, now: dt.datetime) -> list[x509.Certificate]:
    """The CAs a caBundle made from out_dir trusts now (ca-bundle.crt during a rotation, else
    ca.crt), without those that have expired (nothing chains to them any more)."""
    source = out_dir / CA_BUNDLE if (out_dir / CA_BUNDLE).exists() else out_dir / CA_CERT
    try:
        certs = x509.load_pem_x509_certificates(source.read_bytes())
    except OSError as exc:
        raise CertError(f"--rotate: cannot read the current CA {source}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CertError(f"--rotate: {source} is not a PEM certificate: {exc}") from None
    return [cert for cert in certs if cert.not_valid_after_utc > now]


def _refusal(files: list[Path]) -> str:
    out_dir = files[0].parent
    names = " and ".join(str(f) for f in files)
    return (
        f"{names} already {'exists' if len(files) == 1 else 'exist'}: a new CA would invalidate the caBundle injected "
        "from it (the API server then fails every call to the webhook). To renew the serving certificate with "
        f"that CA: --ca-cert {out_dir / CA_CERT} --ca-key {out_dir / CA_KEY}; to change the CA without an "
        "outage: --rotate (the old CA stays in the bundle); to replace it anyway: --force"
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically (a server reloading rotated files never sees half a file), with the
    final mode set before any content exists, so a key is never briefly world-readable."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _key_pem(key: SigningKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _new_ca(common_name: str, now: dt.datetime, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_ca(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, SigningKey]:
    """Load an existing CA; reject non-CA certificates and keys that do not match."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except OSError as exc:
        raise CertError(f"cannot read CA certificate {cert_path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CertError(f"{cert_path} is not a PEM certificate: {exc}") from None
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except OSError as exc:
        raise CertError(f"cannot read CA key {key_path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise CertError(f"{key_path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertError(f"{key_path}: only ECDSA and RSA CA keys are supported, got {type(key).__name__}")
    if _spki(key.public_key()) != _spki(cert.public_key()):
        raise CertError(f"{key_path} does not match the public key of {cert_path}")
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise CertError(f"{cert_path} is not a CA certificate (basicConstraints CA:TRUE missing)")
    return cert, key


def _serving_cert(
    ca_cert: x509.Certificate,
    ca_key: SigningKey,
    key: ec.EllipticCurvePrivateKey,
    common_name: str,
    sans: list[x509.GeneralName],
    now: dt.datetime,
    days: int,
) -> x509.Certificate:
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def generate_bundle(
    service: str,
    namespace: str,
    out_dir: Path,
    days: int = 365,
    extra_sans: Sequence[str] = (),
    ca_cert: Path | None = None,
    ca_key: Path | None = None,
    existing: Existing = "refuse",
) -> Bundle:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (and ``ca.key`` for a new CA) into out_dir.

    A CA already in out_dir is replaced only with ``existing`` ``force`` or ``rotate`` (then
    ``ca-bundle.crt`` holds the new CA and the old ones); signing with that very CA is a renewal."""
    if not service or not namespace:
        raise CertError("service and namespace must not be empty")
    if days < 1:
        raise CertError(f"days must be at least 1, got {days}")
    if (ca_cert is None) != (ca_key is None):
        raise CertError("give both the CA certificate and the CA key, or neither")
    if existing == "rotate" and ca_cert is not None:
        raise CertError("--rotate makes a new CA: give it without --ca-cert/--ca-key")
    sans = _san_entries([*service_dns_names(service, namespace), *extra_sans])
    now = dt.datetime.now(dt.UTC)
    ca_key_out: bytes | None = None
    signing_key: SigningKey
    if ca_cert is not None and ca_key is not None:
        ca, signing_key = load_ca(ca_cert, ca_key)
        if ca.not_valid_after_utc <= now:
            raise CertError(f"CA certificate {ca_cert} expired on {ca.not_valid_after_utc:%Y-%m-%d}")
        if ca.not_valid_before_utc > now:
            start = f"{ca.not_valid_before_utc:%Y-%m-%d %H:%M:%S}"
            raise CertError(f"CA certificate {ca_cert} is not valid before {start} UTC")
    else:
        # The CA outlives the serving certificate so the latter can be renewed with the same
        # caBundle in the webhook configurations.
        ca, signing_key = _new_ca(f"{service}.{namespace} webhook CA", now, max(days * 2, days + 365))
        ca_key_out = _key_pem(signing_key)

    # An existing CA is kept unless asked: the same CA signing again is a renewal.
    present = _ca_files(out_dir)
    renewal = ca_key_out is None and (out_dir / CA_CERT).exists() and _same_certificate(out_dir / CA_CERT, ca)
    stale_key = ca_key_out is None and not renewal and (out_dir / CA_KEY).exists()
    previous: list[x509.Certificate] = []
    if existing == "rotate":
        if not (out_dir / CA_CERT).exists():
            raise CertError(f"--rotate: no CA in {out_dir} to rotate from ({out_dir / CA_CERT} does not exist)")
        previous = [cert for cert in _trusted_before(out_dir, now) if cert != ca]
    elif present and not renewal and existing != "force":
        raise CertError(_refusal(present))

    key = ec.generate_private_key(ec.SECP256R1())
    cert = _serving_cert(ca, signing_key, key, f"{service}.{namespace}.svc", sans, now, days)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:  # defensive: never write a broken chain
        raise CertError(f"generated certificate does not verify against the CA: {exc}") from None

    out_dir.mkdir(parents=True, exist_ok=True)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    trust: Path | None = None
    removed: list[Path] = []
    if ca_key_out is not None:
        _write(out_dir / CA_KEY, ca_key_out, 0o600)
    elif stale_key:  # replaced (--force) by a CA given from elsewhere: its key is not ours to keep
        (out_dir / CA_KEY).unlink()
        removed.append(out_dir / CA_KEY)
    _write(out_dir / CA_CERT, ca_pem, 0o644)
    if existing == "rotate":
        trust = out_dir / CA_BUNDLE
        _write(trust, ca_pem + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in previous), 0o644)
    elif (out_dir / CA_BUNDLE).exists():  # the rotation is over: ca.crt alone is the bundle now
        (out_dir / CA_BUNDLE).unlink()
        removed.append(out_dir / CA_BUNDLE)
    bundle = Bundle(out_dir / CA_CERT, out_dir / TLS_CERT, out_dir / TLS_KEY, trust, tuple(removed))
    _write(bundle.tls_key, _key_pem(key), 0o600)
    _write(bundle.tls_crt, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return bundle
