"""The image-name tables: shape, provenance, order, and rows checked against the cited text.

Where the cited text is in tests/reference (cuda-images.md), rows are compared with it.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from policies.cuda import conventions
from policies.cuda.knowledge import knowledge
from policies.cuda.tables import TABLE_FILES, tables
from policies.cuda.versions import major_minor, parse_version
from tests.support.paths import REFERENCE

REQUIRED_KEYS = {
    "image_conventions.json": {"id", "convention", "source"},
    "ngc_releases.json": {"release", "cuda", "pytorchStated", "source"},
    "ngc_variants.json": {"framework", "variant", "release", "cuda", "source"},
    "tensorflow_cuda.json": {"version", "cuda", "source"},
    "vllm_cuda.json": {"version", "cuda", "source"},
    "plain_images.json": {"name", "source"},
    "no_cuda_images.json": {"image", "what", "source"},
    "no_nccl_images.json": {"image", "what", "source"},
}

OPTIONAL_KEYS = {"no_nccl_images.json": {"tagsThrough"}}


def _version_key(text: str) -> list[int]:
    return [int(x) for x in re.split(r"\.|post", text) if x]


ORDER_KEYS: dict[str, Any] = {
    "image_conventions.json": lambda r: r["id"],
    "ngc_releases.json": lambda r: r["release"],
    "ngc_variants.json": lambda r: (r["framework"], r["variant"], r["release"]),
    "tensorflow_cuda.json": lambda r: _version_key(r["version"]),
    "vllm_cuda.json": lambda r: _version_key(r["version"]),
    "plain_images.json": lambda r: r["name"],
    "no_cuda_images.json": lambda r: r["image"],
    "no_nccl_images.json": lambda r: r["image"],
}


def _doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(resources.files("policies").joinpath("data", name).read_text())
    return doc


@pytest.mark.parametrize("name", TABLE_FILES)
def test_every_row_has_a_source_and_the_expected_keys(name: str) -> None:
    doc = _doc(name)
    assert isinstance(doc["description"], str) and doc["description"]
    assert doc["rows"]
    for row in doc["rows"]:
        assert set(row) - OPTIONAL_KEYS.get(name, set()) == REQUIRED_KEYS[name], row
        assert isinstance(row["source"], str) and len(row["source"]) > 20, row


@pytest.mark.parametrize("name", TABLE_FILES)
def test_rows_strictly_ordered(name: str) -> None:
    keys = [ORDER_KEYS[name](r) for r in _doc(name)["rows"]]
    assert keys == sorted(keys) and len({repr(k) for k in keys}) == len(keys)


@pytest.mark.parametrize(
    ("image", "convention"),
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia-cuda"),
        ("nvcr.io/nvidia/tritonserver:24.10-py3", "ngc-framework"),
        ("nvcr.io/nvidia/pytorch:24.05-py3", "ngc-same-month"),
        ("pytorch/pytorch:2.2.0-cuda12.1-cudnn8-runtime", "pytorch"),
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", "k8s-cuda-sample"),
        ("vllm/vllm-openai:v0.10.0", "vllm"),
        ("tensorflow/tensorflow:2.13.0-gpu", "tensorflow"),
        ("rayproject/ray-llm:2.52.0-py311-cu128", "ray-cu"),
        ("rayproject/ray:2.52.0-py311-cpu", "ray-cpu"),
        ("paddlepaddle/paddle:3.0.0b2-gpu-cuda11.8-cudnn8.6-trt8.5", "paddle"),
        ("paddlepaddle/paddle:cuda126-dev", "paddle-dev"),
        ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-embeddings-inference-cu122.1-6.ubuntu2204",
         "gcp-hf-dlc"),
        ("python:3.12-slim", "plain-os"),
        ("nvcr.io/nvidia/tritonserver:24.06-trtllm-python-py3", "ngc-variant"),
        ("nvcr.io/nvidia/vllm:26.03-py3", "ngc-framework"),
        ("rocm/pytorch:latest", "no-cuda-image"),
    ],
)
def test_every_convention_applied_is_sourced(image: str, convention: str) -> None:
    found = conventions.offline_cuda(image)
    assert found.convention == convention
    assert convention in tables().conventions


def test_conventions_cited_in_the_module_are_in_the_table() -> None:
    cited = set(re.findall(r"``([a-z0-9]+(?:-[a-z0-9]+)+)``", conventions.__doc__ or "")) - {"no-cuda"}
    assert cited and cited <= set(tables().conventions), cited - set(tables().conventions)


def test_versions_resolve_to_known_toolkits() -> None:
    kb, tb = knowledge(), tables()
    rows = [*tb.ngc_releases.values(), *tb.ngc_variants.values(), *tb.tensorflow.values()]
    rows += [row for per_arch in tb.vllm.values() for row in per_arch.values()]
    for row in rows:
        assert kb.toolkit(row.cuda) is not None, row


def test_vllm_rows_name_their_release_files_and_sdist_digest() -> None:
    for row in _doc("vllm_cuda.json")["rows"]:
        assert row["source"].startswith(f"vllm-project/vllm v{row['version']}: .buildkite/release-pipeline.yaml")
        assert re.search(r"sha256:[0-9a-f]{64}$", row["source"]), row
        for arch, cuda in row["cuda"].items():
            assert arch in ("amd64", "arm64")
            assert f"{arch} --build-arg CUDA_VERSION={cuda}" in row["source"] or f"ARG CUDA_VERSION={cuda}" in row["source"]


def test_variant_rows_quote_their_matrix_line() -> None:
    """Each row names its NGC tag and the matrix's four-part CUDA version, whose X.Y.Z is the row's."""
    for row in _doc("ngc_variants.json")["rows"]:
        line = re.search(
            r"^triton-inference-server/server@[0-9a-f]{8} docs/introduction/compatibility\.md \(Container Name: "
            r"([a-z0-9-]+): NGC Tag nvcr\.io/nvidia/tritonserver:(\d\d\.\d\d)-([a-z0-9-]+), CUDA version "
            r"(\d+\.\d+\.\d+)(?:\.\d+)?\)$",
            row["source"],
        )
        assert line is not None, row
        assert line.groups() == (row["variant"], row["release"], row["variant"], row["cuda"]), row
        assert row["framework"] == "tritonserver"


def test_variants_are_not_assumed_to_be_the_main_image() -> None:
    """The matrix disagrees with the main image in some months: proof that a variant needs its own row."""
    tb, kb = tables(), knowledge()
    differ = [
        (v, release)
        for (f, v, release), row in tb.ngc_variants.items()
        if (main := kb.ngc_release(f, release)) is not None and major_minor(main.cuda) != major_minor(row.cuda)
    ]
    assert ("trtllm-python-py3", "25.10") in differ and ("trtllm-python-py3", "24.05") in differ


def test_unresolved_variants_are_sourced_and_never_mapped() -> None:
    doc = _doc("ngc_variants.json")
    keys = [(e["framework"], e["variant"]) for e in doc["unresolved"]]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    mapped = {(r["framework"], r["variant"]) for r in doc["rows"]}
    for entry in doc["unresolved"]:
        assert set(entry) == {"framework", "variant", "reason", "source"}
        assert (entry["framework"], entry["variant"]) not in mapped
        assert entry["reason"] and len(entry["source"]) > 20


def test_no_cuda_images_name_their_build_source() -> None:
    for row in _doc("no_cuda_images.json")["rows"]:
        registry = row["image"].split("/", 1)[0]
        assert "." in registry, row  # a full registry/repository, as the convention matches it
        assert re.match(r"^([\w.-]+/[\w.-]+@[0-9a-f]{8} |https://)", row["source"]), row


def test_tensorflow_rows_quote_their_table_line() -> None:
    for row in _doc("tensorflow_cuda.json")["rows"]:
        line = re.search(r"<tr><td>tensorflow(?:_gpu)?-([0-9.]+)</td>.*<td>([0-9.]+)</td></tr>$", row["source"])
        assert line is not None and line.groups() == (row["version"], row["cuda"]), row


# --- rows checked against tests/reference/cuda-images.md ----------------------------------------


def _reference() -> str:
    return (REFERENCE / "cuda-images.md").read_text()


def _months(cell: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"/|–", cell)]
    if "–" in cell:
        start, end = parts
        (y, m), (y2, m2) = (map(int, start.split(".")), map(int, end.split(".")))
        out = []
        while (y, m) <= (y2, m2):
            out.append(f"{y:02d}.{m:02d}")
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        return out
    return parts


def _cuda_cell(cell: str) -> str | None:
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?)( Update 1)?( Preview)?$", cell.strip())
    if m is None:
        return None
    if m.group(2) and not m.group(3):
        return m.group(1) + ".1"
    return m.group(1)


def test_ngc_month_rows_match_the_reference_table() -> None:
    section = _reference().split("## 3.", 1)[1].split("## 4.", 1)[0]
    stated: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.match(r"^\d{2}\.\d{2}", cells[0]):
            continue
        cuda = _cuda_cell(cells[1])
        if cuda is not None:
            for month in _months(cells[0]):
                stated[month] = cuda
    ours = {r["release"]: r["cuda"] for r in _doc("ngc_releases.json")["rows"]}
    assert ours == stated


def test_forward_compat_rows_match_the_reference_corrections() -> None:
    section = _reference().split("## 4.", 1)[1].split("## 5.", 1)[0]
    forward = knowledge().forward
    assert "it is\n  [470, 525]" in section or "[470, 525]" in section
    assert forward[(12, 1)] == ((470,), (525,))
    missing = section.split("Missing rows", 1)[1].split("\n- ", 1)[0]
    for versions, branches in re.findall(r"((?:\d+\.\d+(?:, )?)+) → \[([\d, ]+)\]", missing):
        for version in versions.split(", "):
            key = major_minor(parse_version(version) or ())
            assert forward[key] == tuple((int(b),) for b in branches.split(", ")), version


def test_triton_rows_fixed_per_the_reference() -> None:
    section = _reference().split("## 4.", 1)[1].split("## 5.", 1)[0]
    assert "docs/introduction/release_notes.md` @d3ee577e4" in section
    ngc = knowledge().ngc
    assert ngc[("tritonserver", "25.01")].datacenter_drivers == ()
    assert "release_notes.md @d3ee577e4" in ngc[("tritonserver", "25.01")].source
    assert ngc[("tritonserver", "24.07")].datacenter_drivers == ()
    assert "12.4.0.41" in section and ngc[("tritonserver", "24.03")].cuda == (12, 4, 0)


def test_convention_examples_in_the_reference_resolve_as_stated() -> None:
    section = _reference().split("## 5.", 1)[1]
    tf = re.search(r"e\.g\.\s+(\d+\.\d+\.\d+) → CUDA (\d+\.\d+)", section)
    assert tf is not None
    assert tables().tensorflow[tf.group(1)].cuda == parse_version(tf.group(2))
    vllm = re.search(r"e\.g\.\s+v(\d+\.\d+\.\d+) → (\d+\.\d+\.\d+)", section)
    assert vllm is not None
    assert tables().vllm[vllm.group(1)]["amd64"].cuda == parse_version(vllm.group(2))
    ray = dict(re.findall(r"(cu1\d\d) = (\d+\.\d+)\.x", section))
    assert ray == {"cu128": "12.8", "cu121": "12.1", "cu118": "11.8"}
    for tag, cuda in ray.items():
        found = conventions.offline_cuda(f"rayproject/ray:2.40.0-py310-{tag}")
        assert found.cuda is not None and found.cuda.version == parse_version(cuda)


@pytest.mark.parametrize(
    ("tag", "through", "matches"),
    [
        ("0.13.5", (0, 13, 5), True),
        ("v0.13.5", (0, 13, 5), True),
        ("0.9.12", (0, 13, 5), True),
        ("0.13.6", (0, 13, 5), False),
        ("1.0.0", (0, 13, 5), False),
        ("0.13", (0, 13, 5), False),
        ("0.13.5-rocm", (0, 13, 5), False),
        ("latest", (0, 13, 5), False),
        (None, (0, 13, 5), False),
        ("9" * 40 + ".1.1", (0, 13, 5), False),
        ("anything", None, True),
        (None, None, True),
    ],
)
def test_no_nccl_rows_bounded_to_release_tags(tag: str | None, through: tuple[int, ...] | None, matches: bool) -> None:
    from policies.cuda.tables import NoNccl, no_nccl_tag_matches

    assert no_nccl_tag_matches(NoNccl("x", "y", through), tag) is matches


def test_no_nccl_tags_through_must_be_a_release() -> None:
    from policies.cuda import tables as t
    from policies.cuda.knowledge import KnowledgeError

    with pytest.raises(KnowledgeError, match="tagsThrough 'latest'"):
        t._no_nccl_row({"image": "docker.io/x/y", "what": "w", "source": "s", "tagsThrough": "latest"})
