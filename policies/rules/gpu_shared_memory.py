"""gpu-shared-memory: a multi-GPU container has no memory-backed emptyDir at /dev/shm.

Container runtimes give each container a 64 MiB ``/dev/shm``.  Multi-GPU processes use shared
memory heavily: NCCL's intra-node transport allocates its buffers there (PyTorch's CI crashed "in
``ncclShmOpen``" until it raised the size, pytorch/tutorials#2475) and PyTorch DataLoader workers
pass batches through it ("unexpected bus error encountered in worker. This might be caused by
insufficient shared memory (shm)").  Kubernetes has no ``--shm-size``; the usual remedy is an
``emptyDir`` with ``medium: Memory`` mounted at ``/dev/shm`` (kubernetes.io, Volumes: "you can set
the emptyDir.medium field to "Memory" to have Kubernetes mount a tmpfs").  Its contents count
against the container's memory limit; ``sizeLimit`` caps it.

Components whose pod is built by an operator (TrainJob ``resourcesPerNode``, NIMService) are not
checked: their volumes come from the runtime or the operator.  Neither are containers an operator
gives a memory-backed /dev/shm itself: KubeRay mounts one in the Ray container of every head and
worker pod (ray-project/kuberay ray-operator/controllers/ray/common/pod.go, ``addEmptyDir`` at
``/dev/shm`` with medium Memory, unless ``rayStartParams`` set ``plasma-directory``).  Volumes a
pod gets from its owner (an Argo Workflow's ``volumes``) count, but are not changed by the fix.

KServe merges its templates over bases (``policies.kserve``), and what they mount counts: an
LLMInferenceService's ``main`` container gets the memory-backed /dev/shm of KServe's well-known
presets (``config-llm-template``, ``config-llm-worker-data-parallel``…), and an InferenceService's
``model`` what its ServingRuntime's ``kserve-container`` mounts, when the runtime is in the input or
the cluster facts.  A base that applies but is not known (``model.runtime`` naming a runtime gpuguard
does not have) makes the finding an info without a fix: the runtime may well mount it.

A ``hostPath`` of the node's own ``/dev/shm`` is memory-backed too — the node's init mounts a tmpfs
there (systemd src/core/mount-setup.c) — so NCCL has room and no warning is given; but the pod then
shares the node's shared memory with the node and every other pod that mounts it, and what it
writes there outlives it, so it is reported as **info**, without a fix (an emptyDir with medium
Memory gives the pod its own; whether sharing was meant is for a person to say).  So is a container
that mounts nothing at /dev/shm in a pod with ``hostIPC: true``: containerd and CRI-O then give it
the node's ``/dev/shm`` instead of a 64 MiB tmpfs of its own (containerd
internal/cri/server/container_create.go and podsandbox/sandbox_run_linux.go: with IPC namespace
mode NODE the container's /dev/shm is the host's; cri-o server/sandbox_run_linux.go: ``if hostIPC
{ shmPath = libsandbox.DevShmPath }``).  A volume mounted at /dev/shm takes its place in both.

A container whose image carries neither NCCL nor PyTorch — a plain OS or language base image (a
Docker Official Image such as ``ubuntu``, ``busybox`` or ``python``: no CUDA, so no NCCL, which is
built on it; policies/data/plain_images.json) or a CUDA sample built on a CUDA base image (NVIDIA's
k8s-samples, policies/data/no_nccl_images.json) — and whose command and args install nothing and
start no distributed launcher (``sleep 3600`` in a scheduler demo) has nothing that needs more than
64 MiB: **info**, without a fix.  So is a container whose command starts vLLM (``vllm serve``,
``python -m vllm.entrypoints…``) with no tensor, pipeline or data parallel size: vLLM's defaults are 1,
so it runs one process on one GPU whatever the pod requests (the message says how to use them all).
So is an MPIJob worker in which the Launcher's ``mpirun`` starts one rank per pod on one GPU
(``-N 1`` and nccl-tests' ``-g 1 -t 1``, policies.mpi_launch): a single-GPU process has no
intra-pod NCCL traffic.  A command that installs or launches a framework at run time
(``pip install torch && torchrun …``) keeps the warning.

The warning itself needs something in the manifest that shows several GPU processes or
shared-memory workers (``policies.shm_users``): a distributed-training kind (PyTorchJob, MPIJob…), a
framework, server or launcher named in the image, the container's name, its command or args
(``pytorch``, ``vllm``, ``tritonserver``, ``torchrun``…), an option that sets a parallel degree or a
process count (``--tensor-parallel-size``, ``--nproc_per_node``), or a variable NCCL or a launcher
reads (``NCCL_*``, ``MASTER_ADDR``); for a KServe component, what its ServingRuntime runs counts too.
A multi-GPU container that shows none of these — a custom image with no command — may as well be one
process on one GPU (a llama.cpp server, a copy of a CUDA sample, one uvicorn worker): **info**,
without a fix, that says what to mount if it does start several.  Judged on the corpora, that class
had as many false warnings as earned ones.

Failing::

    containers:
    - name: trainer
      resources:
        limits: {nvidia.com/gpu: 8}

Passing::

    containers:
    - name: trainer
      resources:
        limits: {nvidia.com/gpu: 8}
      volumeMounts:
      - {name: dshm, mountPath: /dev/shm}
    volumes:
    - name: dshm
      emptyDir: {medium: Memory}

Fix: add an ``emptyDir: {medium: Memory}`` volume (named ``dshm``, or ``dshm-N`` when taken;
an existing memory-backed volume already mounted at /dev/shm by another container is reused) and
mount it at ``/dev/shm``; a plain emptyDir already mounted there gets ``medium: Memory``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from policies.applicability import Applies
from policies.command_words import all_words, leading_words
from policies.cuda.conventions import without_nccl
from policies.kserve import merge_maps
from policies.mpi_launch import MpiLaunch
from policies.podspec import SHM_PATH, ContainerRef, is_shm_mount, runnable_containers
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import gpu_devices
from policies.shapes import as_dict, as_list, text
from policies.shm_users import shared_memory_user
from policies.signals import normal_host_path
from policies.types import RelOp, RelPath, Severity, Violation

ID = "gpu-shared-memory"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = True
SUMMARY = "A multi-GPU container has no memory-backed emptyDir at /dev/shm (NCCL and DataLoader workers need it)."
REMEDIATION = (
    "Mount an emptyDir volume with medium: Memory at /dev/shm in every container with two or more GPUs; "
    "it counts against the memory limit, and sizeLimit caps it."
)
OPTIONS: tuple[Option, ...] = ()

VOLUME_BASE_NAME = "dshm"


def _gpu_count(ctx: RuleContext, c: ContainerRef) -> int:
    return int(sum(gpu_devices(ctx, c).values()))


def _shm_mount(c: ContainerRef) -> tuple[RelPath, dict[str, Any]] | None:
    """Where the container mounts something at /dev/shm (its own volumeMounts, then those it shares)."""
    own = [((*c.path, "volumeMounts", i), m) for i, m in enumerate(as_list(c.container.get("volumeMounts")))]
    for path, m in (*own, *c.shared_mounts):
        if is_shm_mount(m):
            return path, m
    return None


def _find_volume(ctx: RuleContext, name: Any) -> tuple[int | None, dict[str, Any]] | None:
    """(index in the pod spec's volumes, volume); index None for a volume inherited from the owner.

    A volume of the pod spec named like one it inherits from a base KServe merges it over is that
    volume with the spec's values merged in (strategic merge by name, policies.kserve)."""
    inherited = next((v for v in ctx.pod.inherited_volumes if v.get("name") == name), None)
    for i, v in enumerate(as_list(ctx.pod.spec.get("volumes"))):
        if isinstance(v, dict) and v.get("name") == name:
            return i, merge_maps(inherited, v) if inherited is not None and ctx.pod.merged_from else v
    return (None, inherited) if inherited is not None else None


def _is_memory_empty_dir(volume: dict[str, Any]) -> bool:
    empty_dir = volume.get("emptyDir")
    return isinstance(empty_dir, dict) and empty_dir.get("medium") == "Memory"


def _shared_volume_name(ctx: RuleContext) -> str | None:
    """A memory-backed volume some container already mounts at /dev/shm, to reuse."""
    for c in ctx.pod.containers:
        found = _shm_mount(c)
        if found is None:
            continue
        vol = _find_volume(ctx, found[1].get("name"))
        if vol is not None and _is_memory_empty_dir(vol[1]):
            return str(vol[1]["name"])
    return None


def _new_volume_name(ctx: RuleContext) -> str:
    taken = {v.get("name") for v in as_list(ctx.pod.spec.get("volumes")) if isinstance(v, dict)}
    taken.update(v.get("name") for v in ctx.pod.inherited_volumes)
    name, n = VOLUME_BASE_NAME, 1
    while name in taken:
        name, n = f"{VOLUME_BASE_NAME}-{n}", n + 1
    return name


def _add_volume_ops(ctx: RuleContext) -> tuple[str, tuple[RelOp, ...]]:
    reuse = _shared_volume_name(ctx)
    if reuse is not None:
        return reuse, ()
    name = _new_volume_name(ctx)
    volume = {"name": name, "emptyDir": {"medium": "Memory"}}
    if isinstance(ctx.pod.spec.get("volumes"), list):
        return name, (RelOp("add", ("volumes", "-"), volume),)
    return name, (RelOp("add", ("volumes",), [volume]),)


def _add_mount_op(c: ContainerRef, volume_name: str) -> RelOp:
    mount = {"name": volume_name, "mountPath": SHM_PATH}
    if isinstance(c.container.get("volumeMounts"), list):
        return RelOp("add", (*c.path, "volumeMounts", "-"), mount)
    return RelOp("add", (*c.path, "volumeMounts"), [mount])


def _unseen(ctx: RuleContext, c: ContainerRef, gpus: int) -> Violation:
    """No mount at /dev/shm that gpuguard can see, but a base it cannot see is merged under the pod."""
    bases = ", ".join(ctx.pod.unseen_bases)
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs and mounts nothing at /dev/shm itself; KServe merges it with "
            f"{bases}, which gpuguard does not see (not in the input or the cluster facts): unless that mounts an "
            "emptyDir with medium: Memory at /dev/shm, the runtime's 64 MiB /dev/shm is all NCCL and DataLoader "
            "workers get"
        ),
        path=c.path,
        severity=Severity.INFO,
        remediation=(
            f"Lint {bases} with this object (or take the cluster snapshot with it) so gpuguard can tell; if it "
            "mounts nothing at /dev/shm, mount an emptyDir with medium: Memory there."
        ),
    )


# What in a command or args sets up or starts something that uses shared memory at run time.  Narrower
# than policies.shm_users on purpose: on a plain base image only an install or a launch overrides what
# the image is, not a word such as "training" in an echo (KAI's fair-share demo runs `sleep` in ubuntu).
_FRAMEWORK_WORDS = (
    "install", "conda", "mamba", "torch", "nccl", "deepspeed", "accelerate", "horovod", "mpirun", "jax",
    "tensorflow",
)


def _idle_image(c: ContainerRef) -> str | None:
    """What the container's image is, when it carries neither NCCL nor PyTorch and the command sets
    up nothing that needs shared memory; else None."""
    image = c.container.get("image")
    what = without_nccl(image) if isinstance(image, str) else None
    if what is None:
        return None
    if any(any(f in w.lower() for f in _FRAMEWORK_WORDS) for w in leading_words(c.container)):
        return None
    return what


# vLLM's engine arguments that spread one server over several GPUs (or hand the choice to a config
# file); without any, tensor_parallel_size, pipeline_parallel_size and data_parallel_size keep their
# default of 1 (vllm-project/vllm vllm/config/parallel.py ParallelConfig; docs.vllm.ai Engine Arguments).
_VLLM_PARALLEL_FLAGS = (
    "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--data-parallel-size", "-dp",
    "--data-parallel-size-local", "-dpl", "--config",
)


def _single_gpu_vllm(c: ContainerRef) -> bool:
    """Whether the container's own command starts a vLLM server with no parallel-size argument (so on
    one GPU); False whenever a shell variable or an argument gpuguard cannot read could add one."""
    words = all_words(c.container)
    if not words:
        return False
    tokens = [t for w in words for t in w.split()]
    runs_vllm = any(t.startswith("vllm.entrypoints.") for t in tokens) or any(
        a.rsplit("/", 1)[-1] == "vllm" and b == "serve" for a, b in itertools.pairwise(tokens)
    )
    if not runs_vllm or any("$" in t for t in tokens):
        return False
    return not any(t == f or t.startswith(f + "=") for t in tokens for f in _VLLM_PARALLEL_FLAGS)


def _one_gpu_server(c: ContainerRef, gpus: int) -> Violation:
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs with only the runtime's 64 MiB /dev/shm, but it starts vLLM "
            "without --tensor-parallel-size (or a pipeline or data parallel size), so vLLM runs on one GPU with no "
            f"NCCL traffic; to use all {gpus}, pass --tensor-parallel-size {gpus} and mount an emptyDir with "
            "medium: Memory at /dev/shm"
        ),
        path=c.path,
        severity=Severity.INFO,
    )


def _one_rank(c: ContainerRef, gpus: int, launch: MpiLaunch) -> Violation:
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs with only the runtime's 64 MiB /dev/shm, but the MPIJob's "
            f"launcher starts one rank per worker on one GPU ({launch.how}): one process, no NCCL traffic inside "
            f"the pod, and {gpus - 1} of its GPUs idle; to use them all, start {gpus} ranks per worker (or -g "
            f"{gpus}) and mount an emptyDir with medium: Memory at /dev/shm"
        ),
        path=c.path,
        severity=Severity.INFO,
    )


def _unknown_program(c: ContainerRef, gpus: int) -> Violation:
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs with only the runtime's 64 MiB /dev/shm, and nothing in the pod "
            f"shows what its image {text(c.container.get('image'), 120)!r} runs (no framework or launcher in its "
            "image, name, command or env, and not a training job's worker): if it starts several GPU processes "
            "(NCCL) or DataLoader workers, mount an emptyDir with medium: Memory at /dev/shm"
        ),
        path=c.path,
        severity=Severity.INFO,
    )


def _idle(c: ContainerRef, gpus: int, what: str) -> Violation:
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs with only the runtime's 64 MiB /dev/shm, but its image "
            f"{text(c.container.get('image'), 120)!r} is {what} and its command installs nothing: if it runs "
            "NCCL or DataLoader work later, mount an emptyDir with medium: Memory at /dev/shm"
        ),
        path=c.path,
        severity=Severity.INFO,
    )


# The workload controllers whose templates Kubernetes lets omit a container's image (below); other
# kinds without one (a KServe model, whose ServingRuntime gives the image) are judged as they are.
_CONFIG_MANAGED_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"})


def _fragment(c: ContainerRef, gpus: int) -> Violation:
    """A container without an image: a patch or component (kustomize, a values overlay) that config
    management merges onto a base.  Kubernetes' API reference says of Container.image: "This field is
    optional to allow higher level config management to default or override container images in
    workload controllers like Deployments and StatefulSets" (core/v1 Container); the base supplies the
    image, and may supply the /dev/shm volume and mount too."""
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs and mounts nothing at /dev/shm, but it names no image: a patch "
            "or component merged onto a base gpuguard does not see; unless that base mounts an emptyDir with "
            "medium: Memory at /dev/shm, the runtime's 64 MiB /dev/shm is all NCCL and DataLoader workers get"
        ),
        path=c.path,
        severity=Severity.INFO,
        remediation="Lint the rendered result (kubectl kustomize DIR | gpuguard lint) so gpuguard sees the whole pod.",
    )


def _host_ipc(c: ContainerRef, gpus: int) -> Violation:
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs in a pod with hostIPC: true, so the runtime gives it the "
            "node's own /dev/shm: memory-backed, so NCCL and DataLoader workers have room, but shared with the "
            "node and every pod that uses the node's IPC namespace, and what is written there outlives the pod: "
            "an emptyDir with medium: Memory at /dev/shm gives the pod its own"
        ),
        path=c.path,
        severity=Severity.INFO,
    )


def _check_container(ctx: RuleContext, c: ContainerRef, gpus: int) -> Violation | None:
    found = _shm_mount(c)
    if found is None and ctx.pod.spec.get("hostIPC") is True:
        return _host_ipc(c, gpus)
    if found is None and ctx.pod.unseen_bases:
        return _unseen(ctx, c, gpus)
    if found is None and "image" not in c.container and ctx.object.kind in _CONFIG_MANAGED_KINDS:
        return _fragment(c, gpus)
    idle = _idle_image(c) if found is None else None
    if idle is not None:
        return _idle(c, gpus, idle)
    if found is None and _single_gpu_vllm(c):
        return _one_gpu_server(c, gpus)
    launch = ctx.pod.launch
    if found is None and launch is not None and launch.per_pod * launch.gpus_per_process == 1:
        return _one_rank(c, gpus, launch)
    if found is None:
        program = c.container if c.base is None else {**c.base, **c.container}
        why = shared_memory_user(ctx.object.kind, program, ctx.object.controller_kind)
        if why is None:
            return _unknown_program(c, gpus)
        name, volume_ops = _add_volume_ops(ctx)
        at = (*c.path, "volumeMounts") if isinstance(c.container.get("volumeMounts"), list) else c.path
        return Violation(
            message=(
                f"container {c.name!r} uses {gpus} GPUs but has only the runtime's 64 MiB /dev/shm, and {why}: "
                "NCCL and DataLoader workers fail or slow down there; mount an emptyDir with medium: Memory at "
                "/dev/shm"
            ),
            path=at,
            fix=(*volume_ops, _add_mount_op(c, name)),
        )
    at_mount, mount = found
    vol = _find_volume(ctx, mount.get("name"))
    if vol is None and ctx.pod.unseen_bases:
        return None  # the volume may come from the base gpuguard does not see
    if vol is None:
        return Violation(
            message=(
                f"container {c.name!r} mounts volume {text(mount.get('name'), 63)!r} at /dev/shm "
                f"but the pod has no such volume: "
                f"add an emptyDir volume with medium: Memory of that name"
            ),
            path=at_mount,
        )
    vol_index, volume = vol
    if _is_memory_empty_dir(volume):
        return None
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, dict):
        return Violation(
            message=(
                f"container {c.name!r} uses {gpus} GPUs and mounts emptyDir "
                f"{text(volume.get('name'), 63)!r} at /dev/shm, "
                f"but it is disk-backed: set its medium to Memory"
            ),
            path=("volumes", vol_index, "emptyDir") if vol_index is not None else at_mount,
            fix=() if vol_index is None else (RelOp("add", ("volumes", vol_index, "emptyDir", "medium"), "Memory"),),
        )
    if _is_host_shm(volume):
        return Violation(
            message=(
                f"container {c.name!r} uses {gpus} GPUs and mounts the node's own /dev/shm (hostPath volume "
                f"{text(volume.get('name'), 63)!r}): memory-backed, so NCCL and DataLoader workers have room, but "
                f"shared with the node and every pod that mounts it, and what is written there outlives the pod: "
                f"an emptyDir with medium: Memory gives the pod its own"
            ),
            path=at_mount,
            severity=Severity.INFO,
        )
    return Violation(
        message=(
            f"container {c.name!r} uses {gpus} GPUs and mounts volume {text(volume.get('name'), 63)!r} "
            f"at /dev/shm, which is "
            f"not a memory-backed emptyDir: mount an emptyDir with medium: Memory there instead"
        ),
        path=at_mount,
    )


def _is_host_shm(volume: dict[str, Any]) -> bool:
    """A hostPath of the node's /dev/shm (or a directory in it): the tmpfs the node's init mounts
    there (systemd src/core/mount-setup.c: tmpfs at /dev/shm), memory-backed."""
    path = as_dict(volume.get("hostPath")).get("path")
    if not isinstance(path, str):
        return False
    normal = normal_host_path(path)
    return normal == SHM_PATH or normal.startswith(SHM_PATH + "/")


def check(ctx: RuleContext) -> Iterator[Violation]:
    if ctx.pod.shape == "component":
        return
    for c in runnable_containers(ctx.pod):
        if c.path in ctx.pod.shm_provided:
            continue
        gpus = _gpu_count(ctx, c)
        if gpus < 2:
            continue
        violation = _check_container(ctx, c, gpus)
        if violation is not None:
            yield violation
