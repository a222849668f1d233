"""What in a container shows that it runs work that needs more than the runtime's 64 MiB /dev/shm.

Several GPU processes of one job talk through NCCL, whose intra-node transport keeps its buffers
in /dev/shm (PyTorch's CI crashed in ``ncclShmOpen`` until it raised the size,
pytorch/tutorials@0ba3e39); PyTorch DataLoader workers hand batches over through it; the servers
built on them ask for a larger one in their own docs: Text Generation Inference ("A note on Shared
Memory (shm)": NCCL "might fall back to using the host memory", so ``--shm-size 1g``, or an emptyDir
with medium Memory at /dev/shm on Kubernetes; huggingface/text-generation-inference README.md),
NVIDIA NIM for LLMs ("Shared Memory Flag: Pass --shm-size=32GB to docker run. Not required for
single GPU models", docs.nvidia.com/nim/large-language-models configuration), vLLM and SGLang (their
docker examples pass ``--ipc=host`` or ``--shm-size``).

A container with several GPUs whose program gpuguard cannot see (a custom image with no command)
may as well be one process on one GPU: a llama.cpp server, a CUDA sample, a notebook.  So the
evidence is read from what the manifest does show, and each reading is bounded (the command's
words within ``policies.command_words``' bounds, ``_MAX_ENV`` variables; no regular expressions):

* the workload is a distributed-training job (Kubeflow's PyTorchJob, TFJob, MPIJob, PaddleJob,
  XGBoostJob, JAXJob; TorchElastic's ElasticJob; SageMaker HyperPod's HyperPodPyTorchJob), or a pod
  one of them controls: the operators create their pods with a controller reference to the job
  (kubeflow/training-operator pkg/controller.v1/mpi/mpijob_controller.go ``newWorker``:
  ``metav1.NewControllerRef(mpiJob, …)``; kubeflow/common's ``CreatePodsWithControllerRef``), so at
  admission a worker pod is judged as its job was;
* a word of the image reference, the container's name, its command or args names a
  framework or launcher that runs several GPU processes (``pytorch``, ``torchrun``, ``vllm``,
  ``tritonserver``, ``nccl``…), or training (``train``, ``finetune``);
* an argument sets a parallel degree, a world size or a process or GPU count
  (``--tensor-parallel-size``, ``--nproc_per_node``, ``--num-shard``, ``--world_size``…);
* an environment variable is one a distributed launcher or NCCL reads (``NCCL_*``, ``WORLD_SIZE``,
  ``MASTER_ADDR``, ``OMPI_*``…).
"""

from __future__ import annotations

import string
from typing import Any

from policies.command_words import MAX_WORD_CHARS, leading_words
from policies.shapes import as_dict, as_list

_TRAINING_KINDS = frozenset(
    {"PyTorchJob", "TFJob", "MPIJob", "PaddleJob", "XGBoostJob", "JAXJob", "ElasticJob", "HyperPodPyTorchJob"}
)

# Words (split at every character that is not a letter or a digit) that name a framework, server or
# launcher running several GPU processes with NCCL or shared-memory workers, or training.
_WORDS = frozenset({
    "torch", "pytorch", "torchrun", "torchx", "lightning", "fsdp", "ddp", "nccl", "rccl", "deepspeed",
    "accelerate", "horovod", "horovodrun", "mpirun", "mpiexec", "megatron", "nemo", "jax", "tensorflow",
    "vllm", "sglang", "tritonserver", "trtllm", "tgi", "nim", "ray", "dynamo", "train", "trainer", "training",
    "finetune", "pretrain", "sft", "dataloader",
})
# Names spelled over several words, and nccl-tests' programs (all_reduce_perf…).
_PHRASES = ("text-generation-inference", "text-generation-launcher", "tensorrt-llm", "tensorrt_llm", "_perf")
# Options that set a parallel degree, a world size or a process or GPU count (vLLM's
# --tensor-parallel-size, torchrun's --nproc_per_node, TGI's --num-shard, xDiT's
# --ulysses_parallel_degree, DeepSpeed's --num_gpus…): a long option containing one of these, or one
# of the short ones.
_FLAG_PARTS = ("parallel", "world_size", "world-size", "nproc", "num_gpus", "num-gpus", "num_shard", "num-shard",
               "tp_size", "tp-size", "nnodes")
_SHORT_FLAGS = frozenset({"-tp", "--tp", "-pp", "--pp", "-dp", "--dp"})
_ENV_PREFIXES = ("NCCL_", "RCCL_", "OMPI_", "HOROVOD_", "PMIX_", "TORCHELASTIC_")
_ENV_NAMES = frozenset({
    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE", "PET_NPROC_PER_NODE",
    "TENSOR_PARALLEL_SIZE", "NUM_SHARD",
})
_MAX_ENV = 256

_SEPARATORS = str.maketrans({c: " " for c in string.punctuation + string.whitespace})


def _named(value: str) -> str | None:
    """The framework word or phrase in ``value``, if any."""
    low = value[:MAX_WORD_CHARS].lower()
    phrase = next((p for p in _PHRASES if p in low), None)
    if phrase is not None:
        return phrase.strip("_")
    return next((w for w in low.translate(_SEPARATORS).split() if w in _WORDS), None)


def _flag(words: list[str]) -> str | None:
    for word in words:
        for token in word.split():
            name = token.strip("\"'").partition("=")[0]
            if name in _SHORT_FLAGS or (name.startswith("--") and any(p in name for p in _FLAG_PARTS)):
                return name[:64]
    return None


def shared_memory_user(kind: Any, container: Any, controller_kind: Any = None) -> str | None:
    """What shows that ``container`` (in a workload of ``kind``, controlled by one of
    ``controller_kind``) runs several GPU processes or shared-memory workers, said for a message
    ("its command names torchrun"); None when nothing does."""
    if isinstance(kind, str) and kind in _TRAINING_KINDS:
        return f"its workload is a training job ({kind})"
    if isinstance(controller_kind, str) and controller_kind in _TRAINING_KINDS:
        return f"its pod belongs to a training job ({controller_kind})"
    c = as_dict(container)
    image, name = c.get("image"), c.get("name")
    if isinstance(image, str) and (word := _named(image)) is not None:
        return f"its image names {word}"
    if isinstance(name, str) and (word := _named(name)) is not None:
        return f"it is named {word}"
    words = leading_words(c)
    if (flag := _flag(words)) is not None:
        return f"its arguments set {flag}"
    if (word := next((w for w in map(_named, words) if w is not None), None)) is not None:
        return f"its command names {word}"
    for env in as_list(c.get("env"))[:_MAX_ENV]:
        var = as_dict(env).get("name")
        if isinstance(var, str) and shm_user_variable(var):
            return f"its env sets {var[:64]}"
    return None


def shm_user_variable(name: str) -> bool:
    """Whether an environment variable of this name is one a distributed launcher or NCCL reads
    (only its name is evidence: policies.rule_inputs keeps such variables in the memo key)."""
    return name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)
