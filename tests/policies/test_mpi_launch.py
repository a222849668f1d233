"""What an MPIJob's launcher starts in each worker pod (policies.mpi_launch)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.mpi_launch import MpiLaunch, launch_of


def mpijob(*launcher_commands: list[str]) -> dict[str, Any]:
    containers = [{"name": f"l{i}", "image": "x", "command": c} for i, c in enumerate(launcher_commands)]
    worker = {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "j"},
            "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": containers}}}, "Worker": worker}}}


# aws-samples/eks-efa-examples example-jobs/mpi-nccl-test.yaml, as its launcher writes it.
EFA_TEST = ("/opt/amazon/openmpi/bin/mpirun --allow-run-as-root -n 2 -N 1 -x NCCL_DEBUG=INFO "
            "--mca plm_rsh_no_tree_spawn 1 --bind-to none --oversubscribe "
            "/tmp/nccl-tests/build/all_reduce_perf -b 8 -e 2G -f 2 -t 1 -g 1 -c 1 -n 1000")


@pytest.mark.parametrize(("command", "expected"), [
    (["/bin/sh", "-c", EFA_TEST], (1, 1)),
    (["mpirun", "-np", "16", "--map-by", "ppr:8:node", "all_reduce_perf", "-b", "8"], (8, 1)),
    (["mpirun", "--npernode=1", "all_reduce_perf_mpi", "--ngpus=8"], (1, 8)),
    (["mpirun", "-N", "1", "all_gather_perf", "-g", "2", "-t", "4"], (1, 8)),
    (["mpiexec.hydra", "-ppn", "1", "/opt/nccl-tests/build/sendrecv_perf"], (1, 1)),
    # nccl-tests' own -N (run cycles) comes after the program: it says nothing of ranks per node.
    (["mpirun", "-np", "2", "all_reduce_perf", "-N", "1"], None),
    # without a per-node count Open MPI fills each worker's slots first: unknown here.
    (["mpirun", "-np", "2", "all_reduce_perf", "-g", "1"], None),
    (["sh", "-c", "mpirun -N $GPUS all_reduce_perf -g 1"], None),  # a variable sets the count
    (["sh", "-c", "mpirun -N 1 all_reduce_perf -g $G"], None),
    (["mpirun", "-N", "1", "python", "train.py"], None),  # a program that does not say its GPUs
    (["sh", "-c", "mpirun -N 1 all_reduce_perf; mpirun -N 8 all_reduce_perf"], None),  # two launches
    (["sleep", "infinity"], None),
])
def test_launch_of(command: list[str], expected: tuple[int, int] | None) -> None:
    launch = launch_of(mpijob(command))
    assert (None if launch is None else (launch.per_pod, launch.gpus_per_process)) == expected


def test_the_launch_names_what_says_so() -> None:
    launch = launch_of(mpijob(["/bin/sh", "-c", EFA_TEST]))
    assert launch == MpiLaunch(1, 1, "all_reduce_perf", "mpirun -N 1; all_reduce_perf -t 1 -g 1")
    assert launch_of(mpijob(["mpirun", "-N", "1", "all_reduce_perf"])) == MpiLaunch(
        1, 1, "all_reduce_perf", "mpirun -N 1; all_reduce_perf -t 1 (default) -g 1 (default)")


def test_launchers_that_disagree_or_hostile_commands_are_unknown() -> None:
    assert launch_of(mpijob(["mpirun", "-N", "1", "all_reduce_perf"], ["mpirun", "-N", "2", "all_reduce_perf"])) is None
    assert launch_of(mpijob(["mpirun " * 5000 + "all_reduce_perf"])) is None
    assert launch_of(mpijob(["x" * 70000])) is None
    assert launch_of({"spec": {"mpiReplicaSpecs": {"Launcher": "nonsense"}}}) is None
    assert launch_of(None) is None
