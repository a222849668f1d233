"""How many processes an MPIJob's launcher starts in each worker pod, and how many GPUs each drives.

A Kubeflow MPIJob's workers run nothing of their own: the Launcher's ``mpirun`` starts the ranks in
them.  Where it fixes the count per node — Open MPI's ``-N <n>`` ("Launch num processes per node on
all allocated nodes", a synonym for ``--npernode``) or ``--map-by ppr:<n>:node``, Intel MPI and
MPICH Hydra's ``-ppn <n>`` (open-mpi.org mpirun(1), v4.1.8; Intel MPI Library Developer Guide,
"Running an MPI Program") — every worker pod runs that many.  NVIDIA's nccl-tests say how many GPUs
each of their processes drives: ``-t/--nthreads`` threads of ``-g/--ngpus`` GPUs, both 1 by default
(NVIDIA/nccl-tests@a0b82b2 README.md, src/common.cu ``nThreads = 1; nGpus = 1``).

Only a launch that says both is read: one ``mpirun``, a nccl-tests program (``*_perf``,
``*_perf_mpi``) and no shell variable where a count belongs.  Anything else is unknown (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies import patterns
from policies.command_words import all_words
from policies.shapes import as_dict, as_list

_LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun", "mpiexec.hydra"})
_PER_NODE_FLAGS = frozenset({"-N", "-npernode", "--npernode", "-ppn", "--ppn", "-perhost"})
_MAP_BY = frozenset({"--map-by", "-map-by"})
_PPR_NODE = patterns.compile(r"ppr:(\d{1,4}):node(?::.*)?")
_NCCL_TEST = patterns.compile(r"[a-z_]{1,40}_perf(?:_mpi)?")
_COUNT = patterns.compile(r"\d{1,4}")
_MAX_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class MpiLaunch:
    per_pod: int  # processes started in each worker pod
    gpus_per_process: int  # GPUs each of them drives
    program: str  # the program's file name
    how: str  # the options that say so, for messages


def _tokens(container: Any) -> list[str] | None:
    words = all_words(container)
    if words is None:
        return None
    tokens = [t.strip("\"'") for w in words for t in w.split()]
    return tokens if len(tokens) <= _MAX_TOKENS else None


def _count(value: str | None) -> int | None:
    return int(value) if value is not None and _COUNT.fullmatch(value) else None


def _option(tokens: list[str], names: frozenset[str]) -> tuple[str, str | None] | None:
    """The last of ``names`` in ``tokens`` with its value (``-g 1`` or ``--ngpus=1``)."""
    found = None
    for i, t in enumerate(tokens):
        name, eq, value = t.partition("=")
        if name in names:
            found = (name, value if eq else (tokens[i + 1] if i + 1 < len(tokens) else None))
    return found


def _per_node(options: list[str]) -> tuple[int, str] | None:
    flag = _option(options, _PER_NODE_FLAGS)
    if flag is not None:
        n = _count(flag[1])
        return (n, f"{flag[0]} {flag[1]}") if n is not None else None
    mapping = _option(options, _MAP_BY)
    if mapping is not None and mapping[1] is not None and (m := _PPR_NODE.fullmatch(mapping[1])):
        return int(m.group(1)), f"{mapping[0]} {mapping[1]}"
    return None


def _gpus_per_process(args: list[str]) -> tuple[int, str] | None:
    shown = []
    total = 1
    for short, long in (("-t", "--nthreads"), ("-g", "--ngpus")):
        found = _option(args, frozenset({short, long}))
        n = _count(found[1] if found is not None else "1")
        if n is None:
            return None
        total *= n
        shown.append(f"{found[0]} {found[1]}" if found is not None else f"{short} 1 (default)")
    return total, " ".join(shown)


def _from_container(container: Any) -> MpiLaunch | None:
    tokens = _tokens(container)
    if tokens is None:
        return None
    starts = [i for i, t in enumerate(tokens) if t.rsplit("/", 1)[-1] in _LAUNCHERS]
    if len(starts) != 1:
        return None
    rest = tokens[starts[0] + 1:]
    program_at = next((i for i, t in enumerate(rest) if _NCCL_TEST.fullmatch(t.rsplit("/", 1)[-1])), None)
    if program_at is None:
        return None
    per_node = _per_node(rest[:program_at])
    per_process = _gpus_per_process(rest[program_at + 1:])
    if per_node is None or per_process is None:
        return None
    program = rest[program_at].rsplit("/", 1)[-1]
    return MpiLaunch(per_node[0], per_process[0], program, f"mpirun {per_node[1]}; {program} {per_process[1]}")


def launch_of(mpijob: Any) -> MpiLaunch | None:
    """What the MPIJob's Launcher starts in each Worker pod, when its command says (else None)."""
    launcher = as_dict(as_dict(as_dict(as_dict(mpijob).get("spec")).get("mpiReplicaSpecs")).get("Launcher"))
    containers = as_list(as_dict(as_dict(launcher.get("template")).get("spec")).get("containers"))
    launches = {launch for c in containers if (launch := _from_container(c)) is not None}
    return launches.pop() if len(launches) == 1 else None
