"""What the per-snapshot memo costs in memory: bytes per entry, against the reviews it remembers.

    .venv/bin/python bench/memo_memory.py [--reviews 4000] [--replicas]

Judges ``--reviews`` distinct realistic reviews (bench/distinct_reviews.py; ``--replicas``: the
replica stream, ten pods in a row per template) against the example cluster, with tracemalloc on,
and reports what the snapshot's memo holds after them: its entries (bounded by
``policies.facts.MEMO_LIMIT``; past it the memo starts over), the memory the run keeps alive
(allocated while judging and still held at its end: the entries, and any other cache, so an upper
bound for them), bytes per entry, and the same memory as a
ratio of the parsed review objects the entries stand for (the baseline, measured the same way in
the same run).  A memo that kept a review's spec in its keys or values would show a ratio near 1.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _reviews(count: int, replicas: bool) -> list[bytes]:
    spec = importlib.util.spec_from_file_location("distinct_reviews", ROOT / "bench" / "distinct_reviews.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made: list[bytes] = module.replica_reviews(count) if replicas else module.reviews(count)
    return made


def _held(allocate: Any) -> tuple[int, Any]:
    """Bytes still held after ``allocate()`` (whose result is returned), as tracemalloc counts them."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    result = allocate()
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=4000)
    parser.add_argument("--replicas", action="store_true", help="the replica stream instead of distinct reviews")
    args = parser.parse_args(argv)

    from gpuguard.sources.snapshot import load_cluster_facts
    from policies.config import Config
    from policies.engine import evaluate
    from policies.facts import MEMO_LIMIT

    bodies = _reviews(args.reviews, args.replicas)
    config = Config()
    facts = load_cluster_facts(str(ROOT / "examples" / "cluster.yaml"))
    evaluate(orjson.loads(bodies[0])["request"]["object"], config, facts)  # the plan and pinned values
    tracemalloc.start()
    objects_bytes, objects = _held(lambda: [orjson.loads(b)["request"]["object"] for b in bodies])

    def judge_all() -> int:
        for obj in objects:
            evaluate(obj, config, facts)
        return len(facts._memo)

    memo_bytes, entries = _held(judge_all)
    tracemalloc.stop()
    per_entry = memo_bytes / max(entries, 1)
    per_object = objects_bytes / len(objects)
    stream = "replica" if args.replicas else "distinct"
    print(f"{len(objects)} {stream} reviews judged against the example cluster (memo bounded at {MEMO_LIMIT} entries)")
    print(f"memo: {entries} entries holding {memo_bytes / 1024:.0f} KiB: {per_entry:.0f} bytes per entry")
    print(f"baseline: the parsed review objects, {objects_bytes / 1024:.0f} KiB: {per_object:.0f} bytes per object")
    print(f"memo bytes per entry / object bytes per review = {per_entry / per_object:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
