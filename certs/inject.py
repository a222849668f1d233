"""Write a CA bundle into the webhook configurations of YAML manifest files, in place.

Only the documents holding a ValidatingWebhookConfiguration or MutatingWebhookConfiguration are
re-serialised (ruamel.yaml round-trip, so their comments survive); every other document keeps
its exact bytes.  ``check_injectable`` reads and checks a file without writing it, so that a
run can refuse bad ``--inject`` files before it writes anything; the file is replaced atomically
(a temporary file renamed over it), keeping its mode.
"""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEBHOOK_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
WEBHOOK_API_GROUP = "admissionregistration.k8s.io/"

# A document separator: "---" alone (or followed by a comment/space) at the start of a line.
_SEPARATOR = re.compile(r"^---(?:[ \t].*)?$\n?", re.MULTILINE)


class InjectError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Injected:
    file: Path
    webhooks: int  # webhook entries updated
    configurations: int  # webhook configuration documents touched


def _split_documents(text: str) -> list[tuple[str, str]]:
    """(separator, body) pairs whose concatenation is the text."""
    parts: list[tuple[str, str]] = []
    last_end = 0
    separator = ""
    for match in _SEPARATOR.finditer(text):
        parts.append((separator, text[last_end : match.start()]))
        separator = match.group(0)
        last_end = match.end()
    parts.append((separator, text[last_end:]))
    return parts


_KEY_LINE = re.compile(r"^( *)(?:- +)?[^\s#-][^#]*:\s*(?:#.*)?$")
_CONTENT_LINE = re.compile(r"^( *)(- )?\S")


def _indentation(body: str) -> tuple[int, int]:
    """(mapping indent, dash offset) as written: from each ``key:`` line opening a block, the
    indentation of the next content line (a nested key, or a ``- `` item)."""
    mapping: dict[int, int] = {}
    offsets: dict[int, int] = {}
    lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for line, following in itertools.pairwise(lines):
        key = _KEY_LINE.match(line)
        nxt = _CONTENT_LINE.match(following)
        if not key or not nxt:
            continue
        # a key after "- " sits at the item's content column
        dash = re.match(r"^ *- +", line)
        base = dash.end() if dash else len(key.group(1))
        step = len(nxt.group(1)) - base
        if nxt.group(2):
            if step >= 0:
                offsets[step] = offsets.get(step, 0) + 1
        elif step > 0:
            mapping[step] = mapping.get(step, 0) + 1
    indent = max(mapping, key=lambda k: mapping[k]) if mapping else 2
    offset = max(offsets, key=lambda k: offsets[k]) if offsets else 0
    return indent, offset


def _is_webhook_configuration(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") in WEBHOOK_KINDS
        and str(doc.get("apiVersion", "")).startswith(WEBHOOK_API_GROUP)
    )


def _update(doc: Any, ca_bundle: str) -> int:
    from ruamel.yaml.comments import CommentedMap

    webhooks = doc.get("webhooks")
    if not isinstance(webhooks, list):
        return 0
    count = 0
    for webhook in webhooks:
        if not isinstance(webhook, dict):
            continue
        client = webhook.get("clientConfig")
        if not isinstance(client, dict):
            client = CommentedMap()
            webhook["clientConfig"] = client
        client["caBundle"] = ca_bundle
        count += 1
    return count


def _render(path: Path, ca_pem: bytes) -> tuple[str, str, Injected]:
    """(text as read, text with the caBundle set, what was set); InjectError when the file cannot be
    read, is not YAML or holds no webhook configuration."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InjectError(f"cannot read {path}: {exc}") from None
    ca_bundle = base64.b64encode(ca_pem).decode("ascii")
    out: list[str] = []
    webhooks = configurations = 0
    for separator, body in _split_documents(text):
        yaml = YAML(typ="rt")
        yaml.preserve_quotes = True
        yaml.width = 4096  # never fold the long base64 line
        try:
            doc = yaml.load(body) if body.strip() else None
        except YAMLError as exc:
            raise InjectError(f"{path}: invalid YAML: {exc}") from None
        if not _is_webhook_configuration(doc):
            out.append(separator + body)
            continue
        mapping_indent, dash_offset = _indentation(body)
        yaml.indent(mapping=mapping_indent, sequence=dash_offset + 2, offset=dash_offset)
        updated = _update(doc, ca_bundle)
        webhooks += updated
        configurations += 1
        buffer = io.StringIO()
        yaml.dump(doc, buffer)
        out.append(separator + buffer.getvalue())
    if configurations == 0:
        raise InjectError(f"{path}: no ValidatingWebhookConfiguration or MutatingWebhookConfiguration found")
    return text, "".join(out), Injected(path, webhooks, configurations)


def check_injectable(path: Path) -> Injected:
    """What ``inject_ca_bundle`` would set in ``path``, without writing it (InjectError if nothing)."""
    return _render(path, b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")[2]


def _replace(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` atomically (through a symbolic link to its target), keeping the mode."""
    target = Path(os.path.realpath(path))
    mode = target.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def inject_ca_bundle(path: Path, ca_pem: bytes) -> Injected:
    """Set ``webhooks[].clientConfig.caBundle`` to base64(ca_pem) in every webhook configuration."""
    text, new_text, result = _render(path, ca_pem)
    if new_text != text:
        try:
            _replace(path, new_text)
        except OSError as exc:
            raise InjectError(f"cannot write {path}: {exc.strerror or exc}") from None
    return result
