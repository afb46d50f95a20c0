"""What arrives: ModelDeployments, when, how large, and for how long.

An `Arrival` is one ModelDeployment: `replicas` replicas of one engine with
`copies` copies; a copy is one Standalone pod, or a gang of
`pods_per_copy` pods on distinct nodes (one Leader and pods_per_copy - 1
Workers, all claiming the same devices). Every pod requests
`gpus_per_pod` devices named `gpu` matching `selector` (a CEL expression
on the device; empty: any). The deployment lives `lifetime` from its
arrival, placed or not (a team deletes it then; time waiting counts).

Two sources, both giving the same tuple of arrivals:

    a model (YAML)   Poisson arrivals at `ratePerMinute`, each property drawn
                     from its weighted table or distribution with
                     `random.Random(seed)`: the same seed, the same arrivals,
                     for every policy;
    a CSV            one row per deployment: minute, name, replicas, copies,
                     pods_per_copy, gpus_per_pod, lifetime_minutes, selector.

The defaults (examples/sim/arrivals.yaml) and where their numbers come
from are described in examples/sim/README.md.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import yaml
from modelplane_common.cel import SelectorError, compile_selector
from modelplane_common.inputs import problem
from modelplane_common.timeutil import parse_duration


class ArrivalError(ValueError):
    """An arrival model or CSV that cannot be read; one line naming the field."""


@dataclass(frozen=True, slots=True)
class Arrival:
    at: timedelta  # after the start of the run
    name: str
    replicas: int
    copies: int
    pods_per_copy: int  # 1: Standalone; more: a Leader and Workers on distinct nodes
    gpus_per_pod: int
    lifetime: timedelta
    selector: str = ""
    cluster_spreading: str = "Spread"  # spec.clusterSpreading; a policy may change it (run.py)

    @property
    def gang(self) -> bool:
        return self.pods_per_copy > 1

    @property
    def pods(self) -> int:
        return self.replicas * self.copies * self.pods_per_copy

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def deployment(self, namespace: str = "sim") -> dict:
        """The ModelDeployment the core reads (through compose_model_deployment.read_deployment)."""
        request: dict = {"name": "gpu", "count": self.gpus_per_pod}
        if self.selector:
            request["selectors"] = [{"cel": {"expression": self.selector}}]
        template = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai"}]}}
        selector = {"devices": [request]}
        if self.gang:
            members = [
                {"role": "Leader", "nodeSelector": selector, "template": template},
                {
                    "role": "Worker",
                    "worker": {"nodes": self.pods_per_copy - 1},
                    "nodeSelector": selector,
                    "template": template,
                },
            ]
        else:
            members = [{"role": "Standalone", "nodeSelector": selector, "template": template}]
        return {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {
                "replicas": self.replicas,
                "clusterSpreading": self.cluster_spreading,
                "template": {
                    "spec": {
                        # The simulated fleet is all theirs: tolerate every taint.
                        "tolerations": [{"operator": "Exists"}],
                        "engines": [{"name": "engine", "copies": self.copies, "members": members}],
                    }
                },
            },
        }


# --- the model ----------------------------------------------------------------------------


def _table(raw: object, path: str) -> tuple[list[int], list[float]]:
    """A weighted table {value: weight} of whole numbers."""
    if not isinstance(raw, Mapping) or not raw:
        raise ArrivalError(problem(path, "must be a map of value to weight", raw))
    values, weights = [], []
    for value, weight in raw.items():
        if not isinstance(value, int) or value < 1:
            raise ArrivalError(problem(path, "values must be whole numbers of at least 1", value))
        if not isinstance(weight, int | float) or weight < 0:
            raise ArrivalError(problem(f"{path}.{value}", "must be a weight of at least 0", weight))
        values.append(value)
        weights.append(float(weight))
    if not sum(weights):
        raise ArrivalError(problem(path, "needs one positive weight", raw))
    return values, weights


def _duration(raw: object, path: str) -> timedelta:
    try:
        return parse_duration(raw)
    except ValueError as err:
        raise ArrivalError(problem(path, str(err), raw)) from err


def selector(raw: object, path: str) -> str:
    """A CEL selector that compiles (the scheduler's own compiler), or "" for any device."""
    expression = "" if raw is None else str(raw).strip()
    if expression:
        try:
            compile_selector(expression)
        except SelectorError as err:
            raise ArrivalError(problem(path, str(err), expression)) from err
    return expression


@dataclass(frozen=True, slots=True)
class Lifetime:
    """Lognormal lifetimes: heavy-tailed, like job durations in GPU cluster traces."""

    median: timedelta
    sigma: float
    shortest: timedelta
    longest: timedelta

    def draw(self, rnd: random.Random) -> timedelta:
        minutes = rnd.lognormvariate(math.log(self.median.total_seconds() / 60), self.sigma)
        drawn = timedelta(minutes=round(minutes, 1))
        return min(self.longest, max(self.shortest, drawn))


@dataclass(frozen=True, slots=True)
class Model:
    rate_per_minute: float
    replicas: tuple[list[int], list[float]]
    copies: tuple[list[int], list[float]]
    gpus_per_pod: tuple[list[int], list[float]]
    gang_ratio: float
    gang_pods: tuple[list[int], list[float]]
    gang_gpus_per_pod: tuple[list[int], list[float]]
    lifetime: Lifetime
    selectors: tuple[list[str], list[float]]

    def arrivals(self, duration: timedelta, seed: int) -> tuple[Arrival, ...]:
        rnd = random.Random(seed)
        out: list[Arrival] = []
        minute = rnd.expovariate(self.rate_per_minute)
        limit = duration.total_seconds() / 60
        while minute < limit:
            out.append(self._draw(rnd, len(out), timedelta(minutes=round(minute, 2))))
            minute += rnd.expovariate(self.rate_per_minute)
        return tuple(out)

    def _draw(self, rnd: random.Random, seq: int, at: timedelta) -> Arrival:
        def pick(table: tuple[list, list[float]]):
            return rnd.choices(table[0], table[1])[0]

        gang = rnd.random() < self.gang_ratio
        return Arrival(
            at=at,
            name=f"d{seq:05d}",
            replicas=pick(self.replicas),
            copies=1 if gang else pick(self.copies),
            pods_per_copy=pick(self.gang_pods) if gang else 1,
            gpus_per_pod=pick(self.gang_gpus_per_pod if gang else self.gpus_per_pod),
            lifetime=self.lifetime.draw(rnd),
            selector=pick(self.selectors),
        )


def read_model(raw: Mapping) -> Model:
    rate = raw.get("ratePerMinute")
    if not isinstance(rate, int | float) or rate <= 0:
        raise ArrivalError(problem("ratePerMinute", "must be a positive number", rate))
    gang = raw.get("gang") or {}
    ratio = gang.get("ratio", 0)
    if not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise ArrivalError(problem("gang.ratio", "must be a number from 0 to 1", ratio))
    life = raw.get("lifetime") or {}
    sigma = life.get("sigma", 1.0)
    if not isinstance(sigma, int | float) or sigma < 0:
        raise ArrivalError(problem("lifetime.sigma", "must be a number of at least 0", sigma))
    selectors = raw.get("selectors") or [{"weight": 1, "expression": ""}]
    if not isinstance(selectors, list) or not all(isinstance(s, Mapping) for s in selectors):
        raise ArrivalError(
            problem("selectors", "must be a list of {weight, expression}", selectors)
        )
    return Model(
        rate_per_minute=float(rate),
        replicas=_table(raw.get("replicas", {1: 1}), "replicas"),
        copies=_table(raw.get("copies", {1: 1}), "copies"),
        gpus_per_pod=_table(raw.get("gpusPerPod"), "gpusPerPod"),
        gang_ratio=float(ratio),
        gang_pods=_table(gang.get("podsPerCopy", {2: 1}), "gang.podsPerCopy"),
        gang_gpus_per_pod=_table(gang.get("gpusPerPod", {8: 1}), "gang.gpusPerPod"),
        lifetime=Lifetime(
            _duration(life.get("median", "1h"), "lifetime.median"),
            float(sigma),
            _duration(life.get("min", "5m"), "lifetime.min"),
            _duration(life.get("max", "24h"), "lifetime.max"),
        ),
        selectors=(
            [
                selector(s.get("expression"), f"selectors[{i}].expression")
                for i, s in enumerate(selectors)
            ],
            [float(s.get("weight", 1)) for s in selectors],
        ),
    )


@dataclass(frozen=True, slots=True)
class Workload:
    """What the run replays, and for how long."""

    arrivals: tuple[Arrival, ...]
    duration: timedelta


def load(path: Path, seed: int, duration: timedelta | None = None) -> Workload:
    """An arrival model (.yaml/.yml) or a CSV of arrivals (.csv). Raises ArrivalError."""
    if path.suffix == ".csv":
        arrivals = read_csv(path)
        end = max((a.at + a.lifetime for a in arrivals), default=timedelta(hours=1))
        return Workload(arrivals, duration or end)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ArrivalError(f"{path}: cannot be read as YAML: {err}") from err
    if not isinstance(raw, Mapping):
        raise ArrivalError(problem(str(path), "must be a YAML object", raw))
    length = duration or _duration(raw.get("duration", "8h"), "duration")
    return Workload(read_model(raw).arrivals(length, seed), length)


CSV_COLUMNS = (
    "minute",
    "name",
    "replicas",
    "copies",
    "pods_per_copy",
    "gpus_per_pod",
    "lifetime_minutes",
    "selector",
)


def read_csv(path: Path) -> tuple[Arrival, ...]:
    try:
        text = path.read_text()
    except OSError as err:
        raise ArrivalError(f"{path}: cannot be read: {err}") from err
    rows = csv.DictReader(text.splitlines())
    missing = [c for c in CSV_COLUMNS[:-1] if c not in (rows.fieldnames or ())]
    if missing:
        raise ArrivalError(problem(f"{path} header", f"lacks columns {missing}", rows.fieldnames))
    out = [_row(row, line) for line, row in enumerate(rows, start=2)]
    return tuple(sorted(out, key=lambda a: (a.at, a.name)))


def _row(row: Mapping[str, str], line: int) -> Arrival:
    def number(column: str, minimum: float, kind: type = int):
        try:
            value = kind(row[column])
        except (TypeError, ValueError):
            value = None
        if value is None or not math.isfinite(value) or value < minimum:
            raise ArrivalError(
                problem(
                    f"line {line} {column}", f"must be a number of at least {minimum}", row[column]
                )
            )
        return value

    return Arrival(
        at=timedelta(minutes=number("minute", 0, float)),
        name=row["name"] or f"csv{line:05d}",
        replicas=number("replicas", 1),
        copies=number("copies", 1),
        pods_per_copy=number("pods_per_copy", 1),
        gpus_per_pod=number("gpus_per_pod", 1),
        lifetime=timedelta(minutes=number("lifetime_minutes", 1, float)),
        selector=selector(row.get("selector"), f"line {line} selector"),
    )
