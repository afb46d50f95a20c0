"""A published GPU cluster trace as a fleet and arrivals: the Alibaba `openb` traces.

The traces are the csv files Weng et al. published for their Kubernetes
scheduler simulator (USENIX ATC '23, FGD), in the `cluster-trace-gpu-v2023`
folder of the `alibaba/clusterdata` repository on GitHub. The folder states
no licence (only its `cluster-trace-gpu-v2020` sibling carries CC BY 4.0),
so no file of it is shipped here: sim/README.md says how to fetch them, and
the tests read a sample in the same format that we wrote ourselves.

Nodes (`openb_node_list_gpu_node.csv`, columns sn, cpu_milli, memory_mib,
gpu, model): each node with at least one GPU becomes a node of the pool of
its (model, GPU count), named `<model>-x<count>` in lower case, in one
cluster `openb`; the pool's one device kind is `gpu` (driver and device
class `gpu.nvidia.com`) with the model as `gpu.nvidia.com/productName`.
CPU and memory are dropped (the simulator models devices only).
`every` keeps every n-th GPU node in file order, for a smaller fleet of the
same mix.

Pods (`openb_pod_list_*.csv`, columns name, cpu_milli, memory_mib, num_gpu,
gpu_milli, and in the default and gpuspec lists also gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time): the whole-GPU
tasks (num_gpu of 2 or more, or 1 with gpu_milli 1000; CPU-only and
GPU-sharing tasks are left out, counted in `Trace.skipped`), in creation
order (file order without creation_time). Each is one deployment of one
replica of one Standalone pod claiming num_gpu devices; gpu_spec (`A|B`:
any of those models) becomes a CEL selector on the productName.

Arrivals follow the FGD evaluation's inflation rather than the trace's
clock (the trace spans months at a load far below the cluster's): tasks are
drawn uniformly from the whole-GPU tasks, with replacement and a seeded
generator (`--seed`), until their GPUs reach `demand` times the fleet's
GPUs; they arrive evenly over the first half of the run and never leave, so
the second half is the filled cluster. Drawing rather than taking the first
tasks keeps the trace's mix: the pod lists are in creation order, and the
sampled ones (e.g. multigpu50) append the tasks they add at the end.
"""

from __future__ import annotations

import csv
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from modelplane_common.inputs import problem

from modelplane_sim.arrivals import Arrival, ArrivalError, Workload, selector
from modelplane_sim.fleet import Fleet, FleetError, from_fleet_file

NODES_FILE = "openb_node_list_gpu_node.csv"
NODE_COLUMNS = ("sn", "gpu", "model")
# Required; gpu_spec and creation_time are read when present (the sampled pod lists,
# e.g. openb_pod_list_multigpu50.csv, have only name, cpu_milli, memory_mib, num_gpu,
# gpu_milli, and are in creation order already).
POD_COLUMNS = ("name", "num_gpu", "gpu_milli")
CLUSTER = "openb"
WHOLE_GPU_MILLI = 1000


@dataclass(frozen=True, slots=True)
class Task:
    """One whole-GPU task of the trace."""

    name: str
    created: int  # seconds, as in the trace
    gpus: int
    models: tuple[str, ...]  # gpu_spec: the GPU models it may use; empty: any


@dataclass(frozen=True, slots=True)
class Trace:
    fleet: Fleet
    workload: Workload
    nodes: int
    tasks: int  # whole-GPU tasks read
    skipped: int  # CPU-only and GPU-sharing tasks left out
    demand_gpus: int  # GPUs the arrivals ask for in all


def _rows(
    path: Path, columns: Sequence[str], error: type[ValueError]
) -> Iterator[tuple[int, dict]]:
    try:
        text = path.read_text()
    except OSError as err:
        raise error(f"{path}: cannot be read: {err}") from err
    rows = csv.DictReader(text.splitlines())
    missing = [c for c in columns if c not in (rows.fieldnames or ())]
    if missing:
        raise error(problem(f"{path} header", f"lacks columns {missing}", rows.fieldnames))
    yield from enumerate(rows, start=2)


def _whole(value: str | None, where: str, error: type[ValueError]) -> int:
    try:
        number = int(value or "")
    except ValueError:
        number = -1
    if number < 0:
        raise error(problem(where, "must be a whole number of at least 0", value))
    return number


def _pool_name(model: str, gpus: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", f"{model.lower()}-x{gpus}").strip("-")


def read_nodes(path: Path, every: int = 1) -> Fleet:
    """The trace's GPU nodes as one cluster of pools by (model, GPU count)."""
    pools: dict[tuple[str, int], int] = {}
    seen = 0
    for line, row in _rows(path, NODE_COLUMNS, FleetError):
        gpus = _whole(row["gpu"], f"{path} line {line} gpu", FleetError)
        model = (row["model"] or "").strip()
        if not gpus:
            continue
        if not model or model == "nan":
            raise FleetError(
                problem(f"{path} line {line} model", "must name the GPU", row["model"])
            )
        if seen % every == 0:
            pools[(model, gpus)] = pools.get((model, gpus), 0) + 1
        seen += 1
    if not pools:
        raise FleetError(problem(str(path), "must list at least one node with a GPU", seen))
    return from_fleet_file(
        {
            "clusters": [
                {"name": CLUSTER, "pools": [_pool(m, g, n) for (m, g), n in sorted(pools.items())]}
            ]
        }
    )


def _pool(model: str, gpus: int, nodes: int) -> dict:
    device = {
        "name": "gpu",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "gpu.nvidia.com",
        "count": gpus,
        "attributes": {"gpu.nvidia.com/productName": {"string": model}},
    }
    return {"name": _pool_name(model, gpus), "nodes": nodes, "devices": [device]}


def read_tasks(path: Path) -> tuple[tuple[Task, ...], int]:
    """The whole-GPU tasks in creation order, and how many other tasks were left out."""
    tasks: list[Task] = []
    skipped = 0
    for line, row in _rows(path, POD_COLUMNS, ArrivalError):
        where = f"{path} line {line}"
        gpus = _whole(row["num_gpu"], f"{where} num_gpu", ArrivalError)
        milli = _whole(row["gpu_milli"], f"{where} gpu_milli", ArrivalError)
        if gpus == 0 or (gpus == 1 and milli < WHOLE_GPU_MILLI):
            skipped += 1
            continue
        spec = (row.get("gpu_spec") or "").strip()
        models = () if spec in ("", "nan") else tuple(m for m in spec.split("|") if m)
        created = (
            _whole(row["creation_time"], f"{where} creation_time", ArrivalError)
            if "creation_time" in row
            else len(tasks)
        )
        tasks.append(Task(row["name"] or f"line{line}", created, gpus, models))
    return tuple(sorted(tasks, key=lambda t: (t.created, t.name))), skipped


def _selector(models: Sequence[str]) -> str:
    if not models:
        return ""
    names = ", ".join(f'"{m}"' for m in models)
    return selector(f'device.attributes["gpu.nvidia.com"].productName in [{names}]', "gpu_spec")


def inflate(
    tasks: Sequence[Task], target: int, duration: timedelta, seed: int
) -> tuple[Arrival, ...]:
    """Tasks drawn with replacement until their GPUs reach `target`, arriving evenly
    over the first half of `duration` and never leaving."""
    if not tasks or target <= 0:
        return ()
    rnd = random.Random(seed)
    chosen: list[Task] = []
    total = 0
    while total < target:
        task = rnd.choice(tasks)
        chosen.append(task)
        total += task.gpus
    spacing = duration / 2 / len(chosen)
    return tuple(
        Arrival(
            at=spacing * i,
            name=f"t{i:05d}",
            replicas=1,
            copies=1,
            pods_per_copy=1,
            gpus_per_pod=task.gpus,
            lifetime=duration,
            selector=_selector(task.models),
        )
        for i, task in enumerate(chosen)
    )


def load(
    nodes: Path, pods: Path, demand: float, duration: timedelta, every: int = 1, seed: int = 1
) -> Trace:
    """The fleet and workload of a trace. Raises FleetError or ArrivalError."""
    if not math.isfinite(demand) or demand <= 0:
        raise ArrivalError(problem("--trace-demand", "must be a positive share", demand))
    fleet = read_nodes(nodes, every)
    tasks, skipped = read_tasks(pods)
    gpus = sum(p.capacity()[0] for c in fleet.clusters for p in c.pools)
    arrivals = inflate(tasks, math.ceil(demand * gpus), duration, seed)
    node_count = sum(n for c in fleet.clusters for p in c.pools for _, n in p.start)
    return Trace(
        fleet,
        Workload(arrivals, duration),
        node_count,
        len(tasks),
        skipped,
        sum(a.gpus for a in arrivals),
    )


def counts(fleet: Fleet) -> Mapping[str, int]:
    """Nodes per pool, for the run's facts."""
    return {p.name: sum(n for _, n in p.start) for c in fleet.clusters for p in c.pools}
