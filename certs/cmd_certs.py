"""``gpuguard certs``: a CA and serving certificate for the webhook Service, optionally written
into the webhook configurations' ``caBundle``.

A CA already in ``--out-dir`` is replaced only with ``--force`` or ``--rotate`` (certs.tls), and
every ``--inject`` file is read and checked before anything is written: a run that exits 2 has
changed no file."""

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
    replace = parser.add_mutually_exclusive_group()
    replace.add_argument(
        "--force",
        action="store_true",
        help="replace a CA already in --out-dir (the caBundle injected from it stops working)",
    )
    replace.add_argument(
        "--rotate",
        action="store_true",
        help="replace the CA in --out-dir with a new one, keeping the old one in ca-bundle.crt (and in what "
        "--inject writes) until the next renewal, so the caBundle trusts both during the rollout",
    )
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
    from certs.inject import InjectError, check_injectable, inject_ca_bundle
    from certs.tls import CertError, Existing, generate_bundle
    from policies.wording import plural

    if (args.ca_cert is None) != (args.ca_key is None):
        return _fail("--ca-cert and --ca-key must be given together")
    missing = [str(p) for p in args.inject if not p.is_file()]
    if missing:  # checked before anything is written
        return _fail(f"--inject: no such file: {', '.join(missing)}")
    for path in args.inject:  # so is every file's content: nothing is written for a run that fails
        try:
            check_injectable(path)
        except InjectError as exc:
            return _fail(str(exc))
    existing: Existing = "force" if args.force else "rotate" if args.rotate else "refuse"
    try:
        bundle = generate_bundle(
            args.service,
            args.namespace,
            args.out_dir,
            days=args.days,
            extra_sans=args.san,
            ca_cert=args.ca_cert,
            ca_key=args.ca_key,
            existing=existing,
        )
    except CertError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write to {args.out_dir}: {exc.strerror or exc}")
    written = [bundle.ca_crt, bundle.tls_crt, bundle.tls_key] + ([bundle.trust] if bundle.trust else [])
    print(f"wrote {', '.join(str(p) for p in written)}")
    for path in bundle.removed:
        why = ("the rotation is over: the caBundle is " + str(bundle.ca_crt) + " alone" if path.name == "ca-bundle.crt"
               else "it was the key of the CA that was replaced")
        print(f"removed {path} ({why})")
    ca_pem = bundle.ca_bundle.read_bytes()
    for path in args.inject:
        try:
            result = inject_ca_bundle(path, ca_pem)
        except InjectError as exc:
            return _fail(str(exc))
        print(f"{path}: caBundle set in {plural(result.webhooks, 'webhook')} of "
              f"{plural(result.configurations, 'configuration')}")
    if bundle.trust is not None:
        print(
            f"rotation: the caBundle ({bundle.trust}) trusts the new CA and the old; apply the webhook "
            f"configurations first, then deploy {bundle.tls_crt} and {bundle.tls_key}; once every replica "
            f"serves them, renew with --ca-cert {bundle.ca_crt} --ca-key {bundle.ca_crt.parent / 'ca.key'} "
            "--inject … to drop the old CA"
        )
    return 0
