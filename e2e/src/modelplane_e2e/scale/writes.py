"""Write requests as the control plane's API server counts them.

kube-apiserver counts every request it serves in `apiserver_request_total`,
one series per verb, dry_run, group, version, resource, subresource, scope,
component and HTTP code (k8s.io/apiserver v0.35.4, the version
tools/kubernetes pins: `MonitorRequest` in pkg/endpoints/metrics). The verb
is the request's HTTP method made canonical:

- a create is `POST`, an update `PUT`, a JSON or merge patch `PATCH`, a
  server-side apply `APPLY` (a PATCH whose content type is
  application/apply-patch+yaml has a verb of its own: it is not under
  `PATCH`), a delete `DELETE`, also of a whole collection (then its scope
  is `namespace` or `cluster`, not `resource`);
- a read is `GET`, `LIST` or `WATCH`; the exec, attach, log, portforward
  and proxy subresources are `CONNECT`; a method it does not know, `other`.

A write is a request whose verb is in `WRITES`. `CREATE`, `UPDATE` and
`DELETECOLLECTION` are in it too: the API server's own names for those
writes (its request-info verbs), which v0.35.4's metric does not report but
which count as writes should a release report them. Every write counts,
whatever its code or dry run: a refused or conflicting write costs the API
server too.

**A window** counts each series' increase between two readings of the
endpoint; a series absent at the start counts from 0, and one that reads
lower at the end restarted with its API server and counts its end value.
What a run prints (`rows`): writes per replica per minute of the window, the
ten largest kinds of write (resource, subresource and verb, as `kind_of`
names them), the rest as one row, and the requests that are not writes by
verb, so that nothing the API server counted is left out unsaid.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from modelplane_e2e.kube import Kube
from modelplane_e2e.scale import cost

REQUESTS = "apiserver_request_total"
# Verb -> what a write of that verb is called in the breakdown.
WRITES = {
    "POST": "creates",
    "CREATE": "creates",
    "PUT": "updates",
    "UPDATE": "updates",
    "PATCH": "patches",
    "APPLY": "applies",
    "DELETE": "deletes",
    "DELETECOLLECTION": "collection deletes",
}
TOP = 10  # kinds of write the breakdown names one by one


def scrape(control: Kube) -> str:
    """The API server's metrics, read as the platform's admin (system:masters)."""
    return control.kubectl("get", "--raw=/metrics")


def only(text: str, metric: str) -> str:
    """The lines of `metric` in a Prometheus text exposition: kube-apiserver serves
    megabytes of histograms the harness does not read, and parsing them would cost
    seconds at each end of the window."""
    keep = (f"{metric}{{", f"{metric} ", f"# HELP {metric} ", f"# TYPE {metric} ")
    return "".join(line + "\n" for line in text.splitlines() if line.startswith(keep))


def requests(text: str) -> dict[cost.Series, float]:
    """Every series of `apiserver_request_total` in the API server's metrics."""
    return cost.series(only(text, REQUESTS), REQUESTS)


def increase(start: dict[cost.Series, float], end: dict[cost.Series, float]) -> dict:
    """Each series' requests between two readings (module docstring: absent at the
    start counts from 0, lower at the end counts its end value)."""
    out = {}
    for key, value in end.items():
        before = start.get(key, 0.0)
        out[key] = value - before if value >= before else value
    return out


def kind_of(labels: dict[str, str]) -> str:
    """A kind of write, by resource and verb: `objects.kubernetes.m.crossplane.io/status
    updates (PUT)`; a delete of a collection is named apart from one of an object."""
    verb = labels.get("verb", "")
    group = labels.get("group", "")
    resource = labels.get("resource", "") + (f".{group}" if group else "")
    if labels.get("subresource"):
        resource += "/" + labels["subresource"]
    name = WRITES[verb]
    if verb == "DELETE" and labels.get("scope", "resource") != "resource":
        name = WRITES["DELETECOLLECTION"]
    return f"{resource} {name} ({verb})"


@dataclass(frozen=True)
class Requests:
    """What the API server served in a window: writes by kind, every other request
    by verb."""

    writes: dict[str, float]  # kind_of -> requests
    other: dict[str, float]  # verb -> requests that are not writes

    @classmethod
    def of(cls, counted: dict[cost.Series, float]) -> Requests:
        writes: dict[str, float] = defaultdict(float)
        other: dict[str, float] = defaultdict(float)
        for key, value in counted.items():
            labels = dict(key)
            verb = labels.get("verb", "")
            if verb in WRITES:
                writes[kind_of(labels)] += value
            else:
                other[verb] += value
        return cls(dict(writes), dict(other))


def per_replica(per_minute: float, replicas: int) -> float | None:
    return per_minute / replicas if replicas else None


def settled_line(replicas: int, writes_per_minute: float, cpu_per_minute: float) -> str:
    """The `settled:` line a `make e2e-settled` run ends with, for comparing runs (`nan`
    without replicas)."""
    writes = per_replica(writes_per_minute, replicas)
    shown = "nan" if writes is None else f"{writes:.2f}"
    return (
        f"settled: replicas={replicas} writes-per-replica-minute={shown} "
        f"control-plane-cpu-s-per-minute={cpu_per_minute:.1f}"
    )


@dataclass(frozen=True)
class Column:
    """One window's requests per minute and the replicas they are divided by."""

    requests: Requests
    replicas: int

    def cell(self, per_minute: float) -> str:
        value = per_replica(per_minute, self.replicas)
        return "-" if value is None else f"{value:.2f}"


def rows(columns: list[Column], top: int = TOP) -> list[tuple[str, list[str]]]:
    """The breakdown, per replica-minute, one cell per window: every write, the `top`
    kinds of write of the first window (largest first, then by name), the rest as
    one row, then the requests that are not writes, by verb."""
    first = columns[0].requests.writes
    named = sorted(first, key=lambda kind: (-first[kind], kind))[:top]

    def cells(pick: Callable[[Requests], float]) -> list[str]:
        return [column.cell(pick(column.requests)) for column in columns]

    def write(kind: str) -> Callable[[Requests], float]:
        return lambda r: r.writes.get(kind, 0.0)

    def other(verb: str) -> Callable[[Requests], float]:
        return lambda r: r.other.get(verb, 0.0)

    out = [("all write requests", cells(lambda r: sum(r.writes.values())))]
    out += [(f"writes: {kind}", cells(write(kind))) for kind in named]
    out.append(
        (
            f"writes: every other kind (not in the top {top})",
            cells(lambda r: sum(v for k, v in r.writes.items() if k not in named)),
        )
    )
    verbs = sorted({verb for column in columns for verb in column.requests.other})
    out += [(f"not writes: {verb or '(no verb)'}", cells(other(verb))) for verb in verbs]
    return out
