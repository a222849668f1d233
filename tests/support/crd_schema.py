"""Validate custom resources against their CustomResourceDefinition, as the API server does with
strict field validation (``kubectl apply --validate=strict``).

The CRD's ``openAPIV3Schema`` for the object's served version becomes a JSON Schema: every
object schema with ``properties`` refuses other fields unless it says
``x-kubernetes-preserve-unknown-fields`` (the API server would prune them silently; strict field
validation reports them), ``x-kubernetes-int-or-string`` accepts an integer or a string,
``nullable`` admits null. Types, enums, patterns, bounds and ``required`` are checked by
jsonschema; ``x-kubernetes-validations`` rules are evaluated with a CEL interpreter (celpy) on
the value they are attached to (``self``). ``metadata`` is checked for the fields the chart and
the components use (name and namespace as DNS labels or subdomains, labels and annotations as
string maps). Not checked: ``format`` (the API server only checks a few), list-type uniqueness.

The CRDs are in tests/fixtures/crds (SOURCES.md says where each comes from).
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import FIXTURES

CRDS = FIXTURES / "crds"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
METADATA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN},
        "namespace": {"type": "string", "maxLength": 63, "pattern": DNS_LABEL},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


class CRDSchemaError(AssertionError):
    pass


def _strict(schema: Any) -> Any:
    """The JSON Schema for one OpenAPI v3 structural schema node (recursively)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: _strict(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _strict(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_strict(v) for v in value]
        elif key.startswith("x-kubernetes-") or key in ("description", "nullable", "format", "default", "example"):
            continue
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if schema.get("type") == "object" and "properties" in schema and not preserve and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def _rules(schema: Any, value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """(path, rule, value) for every x-kubernetes-validations rule that applies to ``value``."""
    if not isinstance(schema, dict):
        return
    for rule in schema.get("x-kubernetes-validations", []):
        yield path, rule["rule"], value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            yield from _rules(sub, child, f"{path}.{key}")
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _rules(schema.get("items"), child, f"{path}[{i}]")


class CRD:
    def __init__(self, path: Path) -> None:
        (doc,) = [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d]
        if doc.get("kind") != "CustomResourceDefinition":
            raise CRDSchemaError(f"{path}: not a CustomResourceDefinition")
        spec = doc["spec"]
        self.group: str = spec["group"]
        self.kind: str = spec["names"]["kind"]
        self.scope: str = spec["scope"]
        self.versions = {v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served")}

    def errors(self, obj: dict[str, Any]) -> list[str]:
        import jsonschema  # type: ignore[import-untyped]

        celpy: Any = importlib.import_module("celpy")

        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        if group != self.group or obj.get("kind") != self.kind:
            return [f"{obj.get('apiVersion')}/{obj.get('kind')} is not {self.group} {self.kind}"]
        if version not in self.versions:
            return [f"{self.kind}: version {version!r} is not served (served: {sorted(self.versions)})"]
        source = self.versions[version]
        schema = _strict(copy.deepcopy(source))
        schema.setdefault("properties", {})["metadata"] = METADATA
        problems = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(obj)
        ]
        if self.scope == "Namespaced" and not obj.get("metadata", {}).get("namespace"):
            problems.append("metadata.namespace: a namespaced kind needs one")
        env = celpy.Environment()
        for path, rule, value in _rules(source, obj, ""):
            result = env.program(env.compile(rule)).evaluate({"self": celpy.json_to_cel(value)})
            if isinstance(result, celpy.CELEvalError) or not bool(result):
                problems.append(f"{path or '<root>'}: x-kubernetes-validations rule failed: {rule}")
        return problems


@functools.cache
def load_crds(directory: Path = CRDS) -> dict[tuple[str, str], CRD]:
    crds = [CRD(p) for p in sorted(directory.glob("*.yaml"))]
    return {(c.group, c.kind): c for c in crds}


def crd_for(obj: dict[str, Any], crds: dict[tuple[str, str], CRD]) -> CRD | None:
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return crds.get((group, str(obj.get("kind"))))


KUBERNETES_VERSION = "1.33.0"  # as tests/deploy/test_deploy.py validates deploy/


def manifest_problems(obj: dict[str, Any], crds: dict[tuple[str, str], CRD]) -> list[str]:
    """Why the API server would refuse ``obj`` under strict field validation: built-in kinds by
    kubernetes-validate --strict, custom resources by their CRD (an unknown kind is a problem)."""
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    crd = crd_for(obj, crds)
    if crd is not None:
        return crd.errors(obj)
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(str(p) for p in exc.absolute_path) or '<root>'}: {exc.message}"]
    except SchemaNotFoundError as exc:
        return [exc.message + " (and no CRD in tests/fixtures/crds)"]
    return []
