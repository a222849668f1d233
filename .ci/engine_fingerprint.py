"""A digest of everything the engine and the admission layer answer, to prove a speed-up changed nothing.

    .venv/bin/python .ci/engine_fingerprint.py [--dump FILE]

Evaluates, against several sets of cluster facts (none, examples/cluster.yaml, a generated
5,000-node heterogeneous snapshot from bench/webhook_bench.py, and the test fixtures' clusters):

* the 6,000 distinct AdmissionReviews of bench/distinct_reviews.py (and 2,000 replica reviews,
  ten pods in a row per template, served from the memo), through
  ``admission.parse_review`` → ``admission.validate`` / ``admission.mutate`` →
  ``admission.encode_response`` (the response bytes), and through ``policies.engine.evaluate``
  (every finding's rule, severity, path, message, remediation, kind, name, namespace and fix ops;
  skipped rules, placeholders, ignore-annotation uses; and ``Evaluation.patch()``);
* every document of the public corpus (tests/corpus: real manifests; admission reviews wrapped
  as v1 AdmissionReviews), the same way;
* every document of tests/fixtures and examples/manifests, the rule fixtures with their own config,
  cluster and image facts.

It prints one SHA-256 per section and one over all; ``--dump`` writes the canonical lines, so two
dumps can be diffed to find what changed.  The output must be identical before and after a change
that claims to change no result.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import distinct_reviews  # noqa: E402
import webhook_bench  # noqa: E402

from gpuguard.sources.configmodel import load_config  # noqa: E402
from gpuguard.sources.loader import parse_text  # noqa: E402
from gpuguard.sources.snapshot import load_cluster_facts  # noqa: E402
from policies.config import Config  # noqa: E402
from policies.engine import evaluate  # noqa: E402
from policies.facts import ClusterFacts  # noqa: E402
from policies.images import ImageConfig, ImageFacts, ImageLookup  # noqa: E402
from policies.registry import RULES  # noqa: E402
from tests.support.evaluation_text import evaluation_lines  # noqa: E402
from webhook import admission  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
VALIDATE_CONFIG = Config()
# Every fix the mutating webhook may apply, on templates too, so /mutate answers with every patch.
MUTATE_CONFIG = load_config({
    "mutate": [rid for rid, m in RULES.items() if m.FIXABLE and m.MUTATION_SAFE],
    "mutateTemplates": True,
})


class FixtureImages:
    """Image facts from a rule fixture's images.yaml (as tests/policies/rules/test_rule_fixtures.py)."""

    def __init__(self, path: Path) -> None:
        self.known: dict[str, ImageLookup] = {}
        for image, entry in yaml.safe_load(path.read_text()).items():
            if "env" in entry:
                env = tuple(tuple(item.split("=", 1)) for item in entry["env"])
                self.known[image] = ImageLookup("found", ImageConfig(env=env, source=entry.get("source", "")))  # type: ignore[arg-type]
            else:
                self.known[image] = ImageLookup(entry["status"], detail=entry.get("detail", ""))

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        return self.known.get(image)


def review_lines(body: bytes, facts: ClusterFacts) -> Iterator[str]:
    try:
        req = admission.parse_review(body)
    except admission.EnvelopeError as exc:
        yield f"envelope-error {exc}"
        return
    verdict = admission.validate(req, VALIDATE_CONFIG, facts, evaluate)
    yield "validate " + admission.encode_response(req.uid, verdict).decode()
    mutated = admission.mutate(req, MUTATE_CONFIG, facts, evaluate)
    yield "mutate " + admission.encode_response(req.uid, mutated).decode()
    if req.obj is not None:
        yield from evaluation_lines(evaluate(req.obj, VALIDATE_CONFIG, facts))


def documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(label, document) for every document of a manifest file; input errors as labelled text."""
    try:
        parsed = parse_text(path.read_text(encoding="utf-8", errors="replace"), path.name)
    except Exception as exc:  # the fingerprint records what the loader said, whatever it was
        yield f"{path.name}#load-error", f"{type(exc).__name__}: {exc}"
        return
    for error in parsed.errors:
        yield f"{path.name}#input-error", str(error)
    for doc in parsed.documents:
        yield f"{path.name}#{doc.index}", doc.data


def as_review(doc: Any) -> bytes | None:
    """A corpus admission payload (bare request or v1beta1 review) as a v1 AdmissionReview body."""
    if not isinstance(doc, dict):
        return None
    request = doc.get("request") if "request" in doc else doc
    if not isinstance(request, dict):
        return None
    request = {**request, "uid": request.get("uid") or "fingerprint-uid"}  # some samples have none
    return orjson.dumps({"apiVersion": admission.API_VERSION, "kind": admission.KIND, "request": request})


def corpus_review_lines(facts: ClusterFacts, doc: Any) -> Iterator[str]:
    body = as_review(doc)
    if body is None:
        yield "not a review"
        return
    yield from review_lines(body, facts)
    obj = orjson.loads(body)["request"].get("object")
    if isinstance(obj, dict):  # judged even when the envelope is refused
        yield from evaluation_lines(evaluate(obj, VALIDATE_CONFIG, facts))


class Digest:
    def __init__(self, dump: Any) -> None:
        self.total = hashlib.sha256()
        self.dump = dump
        self.sections: list[tuple[str, str, int]] = []

    def section(self, name: str, lines: Iterator[str]) -> None:
        h = hashlib.sha256()
        count = 0
        for line in lines:
            data = f"{name}\t{line}\n".encode()
            h.update(data)
            self.total.update(data)
            if self.dump is not None:
                self.dump.write(data)
            count += 1
        self.sections.append((name, h.hexdigest(), count))
        print(f"{h.hexdigest()}  {count:>8} lines  {name}", flush=True)


def _manifest_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))


def _each_document(files: list[Path], per_doc: Callable[[Any], Iterator[str]]) -> Iterator[str]:
    for path in files:
        for label, doc in documents(path):
            yield f"== {label}"
            if isinstance(doc, str) and "#" in label and label.rsplit("#", 1)[1].endswith("error"):
                yield doc
                continue
            yield from per_doc(doc)


def evaluated(config: Config, facts: ClusterFacts, images: ImageFacts | None, doc: Any) -> Iterator[str]:
    return evaluation_lines(evaluate(doc, config, facts, images))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, help="write the canonical lines here")
    parser.add_argument("--reviews", type=int, default=6000)
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args(argv)

    generated = f"generated-{args.nodes}"
    with tempfile.TemporaryDirectory(prefix="gpuguard-fingerprint-") as tmp:
        big = Path(tmp) / f"cluster-{args.nodes}.json"
        webhook_bench.generate_snapshot(big, args.nodes)
        clusters: dict[str, ClusterFacts] = {
            "none": ClusterFacts.empty(),
            "example": load_cluster_facts(str(EXAMPLE_CLUSTER)),
            generated: load_cluster_facts(str(big)),
        }
    for path in sorted((FIXTURES / "clusters").glob("*.yaml")) + sorted((FIXTURES / "dra").glob("*cluster*.yaml")):
        if path.name != "gke-pools.yaml":
            clusters[path.stem] = load_cluster_facts(str(path))
    gke_config = load_config(yaml.safe_load((FIXTURES / "clusters" / "gke-pools.yaml").read_text()))

    dump = args.dump.open("wb") if args.dump else None
    digest = Digest(dump)
    bodies = distinct_reviews.reviews(args.reviews)
    for name in ("example", generated, "none"):
        facts = clusters[name]
        digest.section(f"distinct-reviews@{name}", (line for body in bodies for line in review_lines(body, facts)))
    replicas = distinct_reviews.replica_reviews(2000)  # memo hits: replicas of a template in a row
    for name in ("example", "none"):
        facts = clusters[name]
        digest.section(f"replica-reviews@{name}", (line for body in replicas for line in review_lines(body, facts)))

    real = _manifest_files(CORPUS / "real") + _manifest_files(CORPUS / "helm-templates")
    for name, facts in clusters.items():
        digest.section(f"corpus@{name}", _each_document(real, partial(evaluated, VALIDATE_CONFIG, facts, None)))
    digest.section("corpus@gke+pools", _each_document(real, partial(evaluated, gke_config, clusters["gke"], None)))
    reviews = _manifest_files(CORPUS / "admission-reviews")
    for name in ("none", "example", generated):
        digest.section(f"corpus-reviews@{name}", _each_document(reviews, partial(corpus_review_lines, clusters[name])))

    for rule_dir in sorted(p for p in (FIXTURES / "rules").iterdir() if p.is_dir()):
        config_file, cluster_file, images_file = (rule_dir / n for n in ("config.yaml", "cluster.yaml", "images.yaml"))
        config = load_config(yaml.safe_load(config_file.read_text())) if config_file.exists() else VALIDATE_CONFIG
        facts = load_cluster_facts(str(cluster_file)) if cluster_file.exists() else clusters["example"]
        images = FixtureImages(images_file) if images_file.exists() else None
        files = [rule_dir / n for n in ("bad.yaml", "good.yaml", "fixed.yaml") if (rule_dir / n).exists()]
        per_doc = partial(evaluated, config, facts, images)
        digest.section(f"rule-fixtures/{rule_dir.name}", _each_document(files, per_doc))
    others = [p for p in _manifest_files(FIXTURES) if p.relative_to(FIXTURES).parts[0] != "rules"
              and p.name != "corpus-expected.json"] + _manifest_files(ROOT / "examples" / "manifests")
    for name, facts in clusters.items():
        digest.section(f"fixtures@{name}", _each_document(others, partial(evaluated, VALIDATE_CONFIG, facts, None)))
    if dump is not None:
        dump.close()
    print(f"{digest.total.hexdigest()}  total ({sum(c for _, _, c in digest.sections)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
