"""``gpuguard certs``: a CA and serving certificate for the webhook Service, optionally written
into the webhook configurations' ``caBundle``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_ERROR = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", required=True, help="name of the webhook Service")
    parser.add_argument("--namespace", required=True, help="namespace of the webhook Service")
    parser.add_argument("--out-dir", required=True, type=Path, help="directory for ca.crt, tls.crt, tls.key")
    parser.add_argument("--days", type=int, default=365, help="validity of the serving certificate (default 365)")
    parser.add_argument(
        "--san",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="extra subject alternative names (DNS names or IP addresses)",
    )
    parser.add_argument("--ca-cert", type=Path, help="sign with this existing CA certificate (PEM)")
    parser.add_argument("--ca-key", type=Path, help="private key of --ca-cert (PEM, unencrypted)")
    parser.add_argument(
        "--inject",
        action="extend",
        nargs="+",
        default=[],
        type=Path,
        metavar="WEBHOOK_YAML",
        help="write the CA bundle into the webhook configurations in these files, in place",
    )


def _fail(message: str) -> int:
    print(f"gpuguard certs: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    from certs.inject import InjectError, inject_ca_bundle
    from certs.tls import CertError, generate_bundle
    from policies.wording import plural

    if (args.ca_cert is None) != (args.ca_key is None):
        return _fail("--ca-cert and --ca-key must be given together")
    missing = [str(p) for p in args.inject if not p.is_file()]
    if missing:  # checked before anything is written
        return _fail(f"--inject: no such file: {', '.join(missing)}")
    try:
        bundle = generate_bundle(
            args.service,
            args.namespace,
            args.out_dir,
            days=args.days,
            extra_sans=args.san,
            ca_cert=args.ca_cert,
            ca_key=args.ca_key,
        )
    except CertError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write to {args.out_dir}: {exc.strerror or exc}")
    print(f"wrote {bundle.ca_crt}, {bundle.tls_crt}, {bundle.tls_key}")
    ca_pem = bundle.ca_crt.read_bytes()
    for path in args.inject:
        try:
            result = inject_ca_bundle(path, ca_pem)
        except InjectError as exc:
            return _fail(str(exc))
        print(f"{path}: caBundle set in {plural(result.webhooks, 'webhook')} of "
              f"{plural(result.configurations, 'configuration')}")
    return 0
