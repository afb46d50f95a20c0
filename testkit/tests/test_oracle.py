"""The oracle's plans and verdicts (no cluster): what it asks kube-scheduler, from the
agent's view alone, and how it reads the answers."""

from __future__ import annotations

import pytest
from modelplane_agent.partitions import SLICE_ORDER
from modelplane_agent.pools import BINDING_CONDITIONS, LACKS_DECLARED, SHARED_DEVICES
from modelplane_testkit.oracle import (
    Oracle,
    Probe,
    Series,
    final,
    planned_series,
    report_binding_conditions,
    sorted_verdicts,
    verdict,
)
from modelplane_testkit.oracle_states import Pool

POOL = Pool(
    "p",
    [
        {"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "whole-gpu.example.com"},
        {"name": "nic", "driver": "nic.example.com", "deviceClassName": "nic.example.com"},
    ],
    [],
    {"cpu": "1", "memory": "4Gi"},
)
DISPUTED = {"uncounted": ["DeviceTaintRule without deviceSelector (r)"]}


def bind_all(series: Series, refused_at: int | None = None) -> list[tuple[dict, bool]]:
    """Play kube-scheduler binding every pod of the series (but the `refused_at`-th)
    until the series ends; the pods asked, with what the view expects of each."""
    while (probe := series.next_probe()) is not None:
        refused = refused_at is not None and len(series.probes) - 1 == refused_at
        probe.outcome = ("refused", "no room") if refused else ("bound", series.node)
    return [(p.counts, p.expect_bound) for p in series.probes]


@pytest.mark.parametrize(
    ("entry", "fits"),
    [
        pytest.param({"free": {"gpu": 3, "nic": 1}}, {"gpu": 3, "nic": 1}, id="as many as free"),
        pytest.param(
            {"free": {"gpu": 1, "nic": 1}, "cappedBy": "cpu", "uncapped": {"gpu": 4, "nic": 2}},
            {"gpu": 1, "nic": 1},
            id="a capped node as many as the cap, not as its devices alone",
        ),
        pytest.param({"leftOut": "cordoned"}, {"gpu": 0, "nic": 0}, id="a left-out node none"),
        pytest.param(
            {"free": {"gpu": 0, "nic": 0}, "noRoomFor": "memory"},
            {"gpu": 0, "nic": 0},
            id="a node without room for a pod none",
        ),
    ],
)
def test_a_series_places_as_many_pods_as_the_view_counts_then_one_more(entry, fits):
    by_kind = planned_series(POOL, {"n1": entry}, "s1")
    assert [[(s.node, s.kind, s.fits) for s in kind] for kind in by_kind] == [
        [("n1", "gpu", fits["gpu"])],
        [("n1", "nic", fits["nic"])],
    ]
    gpu = by_kind[0][0]
    assert bind_all(gpu) == [({"gpu": 1}, True)] * fits["gpu"] + [({"gpu": 1}, False)]
    assert [p.disagrees for p in gpu.probes] == [False] * fits["gpu"] + [True]


def test_a_series_stops_at_the_first_pod_refused_within_the_count():
    series = planned_series(POOL, {"n1": {"free": {"gpu": 4, "nic": 0}}}, "s1")[0][0]
    assert bind_all(series, refused_at=1) == [({"gpu": 1}, True), ({"gpu": 1}, True)]
    assert [p.disagrees for p in series.probes] == [False, True]
    assert [p.name for p in series.probes] == ["s1-seq0-0-0", "s1-seq0-0-1"]


def probe(node: str, expect_bound: bool, outcome: str) -> Probe:
    return Probe(node, "test", {"gpu": 1}, expect_bound, f"{node}-{outcome}", (outcome, "x"))


@pytest.mark.parametrize(
    ("view", "probes", "disagreeing", "declared"),
    [
        pytest.param(
            {"n1": {"free": {"gpu": 0}, **DISPUTED}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count on a node the agent declares it for is declared, not disagreeing",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 1}, **DISPUTED}},
            [probe("n1", True, "refused")],
            ["n1-refused"],
            [],
            id="an over-count is a disagreement even where the agent declares an under-count",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0}, **DISPUTED}},
            [probe("n1", True, "undecided")],
            ["n1-undecided"],
            [],
            id="an undecided probe is a disagreement wherever it is",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0}, **DISPUTED}, "n2": {"free": {"gpu": 0}}},
            [probe("n2", False, "bound")],
            ["n2-bound"],
            [],
            id="an under-count on a node that declares nothing is a disagreement",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0, "nic": 0}, "uncounted": ["shared pool name"]}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count where two drivers' pools share a name is declared",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 3}, "uncounted": [SLICE_ORDER]}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count where partitions span slices read in any order is declared",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 2}, "uncounted": ["network-attached devices"]}},
            [probe("n1", False, "bound"), probe("n1", True, "refused")],
            ["n1-refused"],
            ["n1-bound"],
            id="an under-count where network-attached devices serve the node is declared, "
            "an over-count there is not",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0}, "uncounted": [f"{LACKS_DECLARED} of device kind gpu"]}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count where a device lacks a declared entry, which kube-scheduler "
            "fails the node on only when it tries that device, is declared",
        ),
        pytest.param(
            {
                "n1": {
                    "free": {"gpu": 0},
                    "uncounted": ["device kind gpu: a device differs from the declared model"],
                }
            },
            [probe("n1", False, "bound")],
            ["n1-bound"],
            [],
            id="an under-count where a device differs from the declaration is a disagreement: "
            "the claims' selectors refuse it",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 1}, "uncounted": [SHARED_DEVICES]}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count where devices allow multiple allocations is declared",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0}, "uncounted": [BINDING_CONDITIONS]}},
            [probe("n1", False, "bound")],
            [],
            ["n1-bound"],
            id="an under-count where free devices wait on binding conditions is declared",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 0}, "uncounted": ["incomplete resource pool"]}},
            [probe("n1", False, "bound")],
            ["n1-bound"],
            [],
            id="an under-count on a node declaring another cause is a disagreement",
        ),
        pytest.param(
            {"n1": {"free": {"gpu": 1}}},
            [probe("n1", True, "bound"), probe("n1", False, "refused")],
            [],
            [],
            id="probes that go as the view says are neither",
        ),
    ],
)
def test_verdicts_declare_only_under_counts_the_agent_names(view, probes, disagreeing, declared):
    verdicts = sorted_verdicts(probes, view)
    assert [p.name for p in verdicts.disagreements] == disagreeing
    assert [p.name for p in verdicts.declared] == declared


@pytest.mark.parametrize(
    ("expect_bound", "outcome", "is_final"),
    [
        pytest.param(
            True, ("bound", "n"), True, id="a bound probe the view expects bound is decided"
        ),
        pytest.param(
            False, ("bound", "n"), True, id="a bound probe the view expects refused is decided"
        ),
        pytest.param(
            False, ("refused", "no room"), True, id="a refusal the view expects is decided"
        ),
        pytest.param(
            True,
            ("refused", "no room"),
            False,
            id="a refusal of a probe expected to bind waits: kube-scheduler retries it",
        ),
    ],
)
def test_which_verdicts_end_the_wait(expect_bound, outcome, is_final):
    probe = Probe("n", "exact", {"gpu": 1}, expect_bound, "p-0", outcome)
    assert final(probe) is is_final


class RecordingClient:
    """Records deletions; lists nothing (every claim already gone)."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete(self, resource, name, namespace=None, grace_period=None) -> None:
        self.deleted.append(name)

    def list(self, resource, namespace=None):
        return []


def test_probes_are_removed_refused_first_so_none_is_retried_onto_devices_released():
    series = Series("n", "gpu", 2, "s")
    bind_all(series, refused_at=2)  # two bound, the third refused
    client = RecordingClient()
    Oracle(client, "oracle", {}).remove(series.probes, wait=True)
    assert client.deleted == ["s-2", "s-2", "s-0", "s-0", "s-1", "s-1"]


SELECTING = Pool(
    "p",
    [
        {
            "name": "gpu",
            "driver": "gpu.example.com",
            "deviceClassName": "whole-gpu.example.com",
            "attributes": {"gpu.example.com/model": {"string": "a100"}},
            "selectors": ['device.attributes["gpu.example.com"].model == "a100"'],
        },
        {"name": "nic", "driver": "nic.example.com", "deviceClassName": "nic.example.com"},
    ],
    [],
    None,
)


class BindingClient(RecordingClient):
    """Records what is created; lists every pod created as bound."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[dict] = []

    def create(self, obj) -> None:
        self.created.append(obj)

    def list(self, resource, namespace=None, labels=None):
        pods = [o for o in self.created if "containers" in o["spec"]]
        return [{**p, "spec": {**p["spec"], "nodeName": "n"}} for p in pods]


def test_every_probe_claim_carries_the_kinds_request_selectors_as_the_fleets_claims_do():
    client = BindingClient()
    probes = [
        Probe("n", "exact", {"gpu": 2, "nic": 1}, True, "exact"),
        Probe("n", "one more gpu", {"gpu": 1}, False, "more"),
    ]
    Oracle(client, "oracle", {}).decide(SELECTING, probes, "exact")
    claims = [o for o in client.created if "devices" in o["spec"]]
    requests = {
        (c["metadata"]["name"], r["name"]): r["exactly"]
        for c in claims
        for r in c["spec"]["devices"]["requests"]
    }
    selecting = [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "a100"'}}]
    assert requests[("exact", "gpu")]["selectors"] == selecting
    assert requests[("more", "gpu")]["selectors"] == selecting
    assert "selectors" not in requests[("exact", "nic")]
    assert requests[("exact", "gpu")]["count"] == 2


def _pod(reason: str, message: str) -> dict:
    condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"spec": {}, "status": {"conditions": [condition]}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param({"spec": {"nodeName": "n"}}, ("bound", "n"), id="a pod with a node is bound"),
        pytest.param(
            _pod("Unschedulable", "0/1 nodes"),
            ("refused", "0/1 nodes"),
            id="an Unschedulable pod is refused",
        ),
        pytest.param(
            _pod("SchedulerError", "claim x: selector #0: CEL runtime error: no such key"),
            ("refused", "claim x: selector #0: CEL runtime error: no such key"),
            id="a claim whose selector fails on the node's devices is refused there",
        ),
        pytest.param(
            _pod("SchedulerError", "binding rejected: etcd timeout"),
            None,
            id="any other scheduler error is undecided: kube-scheduler retries it",
        ),
        pytest.param({"spec": {}}, None, id="a pod not tried yet is undecided"),
    ],
)
def test_how_a_probes_pod_reads(pod, expected):
    assert verdict(pod) == expected


def allocated(name: str, *results: dict, reported: list[dict] | None = None) -> dict:
    status: dict = {"allocation": {"devices": {"results": list(results)}}}
    if reported is not None:
        status["devices"] = reported
    return {"metadata": {"name": name}, "status": status}


def result(device: str, conditions: list[str] | None = None, share: str | None = None) -> dict:
    out: dict = {"request": "r0", "driver": "gpu.example.com", "pool": "n1", "device": device}
    if conditions:
        out["bindingConditions"] = conditions
        out["bindingFailureConditions"] = ["example.com/failed"]
    if share:
        out["shareID"] = share
    return out


class StatusClient:
    """Serves `claims` and records each status patch (name -> status.devices)."""

    def __init__(self, *claims: dict) -> None:
        self.claims = list(claims)
        self.patched: dict[str, list[dict]] = {}

    def list(self, resource, namespace=None):
        return self.claims

    def patch(self, resource, name, patch, namespace=None, patch_type=None) -> None:
        self.patched[name] = patch["status"]["devices"]


def reported(devices: list[dict]) -> list[tuple]:
    return [
        (d["device"], d.get("shareID"), [(c["type"], c["status"]) for c in d["conditions"]])
        for d in devices
    ]


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        pytest.param(
            allocated("c", result("gpu-0", ["example.com/attached"]), result("gpu-1")),
            {"c": [("gpu-0", None, [("example.com/attached", "True")])]},
            id="a device allocated with binding conditions has them reported True, no other",
        ),
        pytest.param(
            allocated("c", result("shared-0", ["a", "b"], share="u1")),
            {"c": [("shared-0", "u1", [("a", "True"), ("b", "True")])]},
            id="every binding condition of a share is reported under its shareID",
        ),
        pytest.param(
            allocated(
                "c",
                result("gpu-0", ["example.com/attached"]),
                reported=[
                    {"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0", "conditions": []}
                ],
            ),
            {},
            id="a device whose status is reported already is left to its driver",
        ),
        pytest.param(allocated("c", result("gpu-0")), {}, id="a claim without them is untouched"),
        pytest.param({"metadata": {"name": "c"}}, {}, id="an unallocated claim is untouched"),
    ],
)
def test_the_harness_reports_binding_conditions_as_a_driver_would(claim, expected):
    client = StatusClient(claim)
    report_binding_conditions(client, "oracle")
    assert {name: reported(devices) for name, devices in client.patched.items()} == expected
