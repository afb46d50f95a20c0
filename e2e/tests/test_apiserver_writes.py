"""The control plane API server's write requests as an `e2e-settled` run counts them
(`modelplane_e2e.scale.writes`), on metrics written here in the Prometheus
text format the way kube-apiserver v1.35 labels `apiserver_request_total`."""

from __future__ import annotations

import re

import pytest
from modelplane_e2e.scale import settled, writes

OBJECTS = "kubernetes.m.crossplane.io"
MODELPLANE = "modelplane.ai"
HELP = (
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for "
    "each verb, dry run value, group, version, resource, scope, component, and HTTP "
    "response code.\n# TYPE apiserver_request_total counter\n"
)


def _line(value: float, verb: str, resource: str, group: str = "", **more: str) -> str:
    labels = {
        "code": "200", "component": "apiserver", "dry_run": "", "group": group,
        "resource": resource, "scope": "resource", "subresource": "", "verb": verb,
        "version": "v1", **more,
    }  # fmt: skip
    inside = ",".join(f'{name}="{text}"' for name, text in labels.items())
    return f"apiserver_request_total{{{inside}}} {value:g}\n"


# What else kube-apiserver serves beside the counter: histograms of the same requests
# under longer names, a metric whose name starts like it, a comment naming it.
NOISE = (
    "# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution.\n"
    "# TYPE apiserver_request_duration_seconds histogram\n"
    'apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",'
    'group="",resource="pods",scope="resource",subresource="",verb="PUT",version="v1",'
    'le="0.005"} 9000\n'
    "# HELP apiserver_request_total_guess not the counter\n"
    "# TYPE apiserver_request_total_guess gauge\n"
    'apiserver_request_total_guess{verb="PUT"} 12345\n'
    "process_cpu_seconds_total 77.5\n"
)


def _scrape(*lines: str) -> str:
    return NOISE + HELP + "".join(lines) + NOISE


STATUS_PUT = dict(verb="PUT", resource="objects", group=OBJECTS, subresource="status")


def test_the_counter_is_read_by_series_and_nothing_else_is():
    text = _scrape(
        _line(40, **STATUS_PUT),
        _line(3, **STATUS_PUT, code="409"),
        _line(7, "GET", "objects", OBJECTS),
    )
    read = writes.requests(text)
    assert sorted(read.values()) == [3.0, 7.0, 40.0]
    conflict = {k: v for k, v in read.items() if dict(k)["code"] == "409"}
    assert [dict(k)["subresource"] for k in conflict] == ["status"]


def test_the_filter_keeps_the_counters_lines_whole():
    apply = _line(5, "APPLY", "modelreplicas", MODELPLANE)
    assert writes.only(_scrape(apply), writes.REQUESTS) == HELP + apply


A = (("verb", "PUT"), ("resource", "objects"))
B = (("verb", "APPLY"), ("resource", "objects"))
C = (("verb", "GET"), ("resource", "objects"))


@pytest.mark.parametrize(
    ("start", "end", "want"),
    [
        pytest.param({A: 10.0}, {A: 25.0}, {A: 15.0}, id="a series counts what it grew by"),
        pytest.param({}, {B: 4.0}, {B: 4.0}, id="a series absent at the start counts from 0"),
        pytest.param(
            {A: 100.0}, {A: 6.0}, {A: 6.0},
            id="a series lower at the end restarted with its API server: its end value",
        ),
        pytest.param(
            {A: 5.0, C: 2.0}, {A: 5.0}, {A: 0.0}, id="a series gone at the end is not counted"
        ),
    ],
)  # fmt: skip
def test_increase(start, end, want):
    assert writes.increase(start, end) == want


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param(
            {"verb": "PUT", "resource": "objects", "group": OBJECTS, "subresource": "status"},
            "objects.kubernetes.m.crossplane.io/status updates (PUT)",
            id="an update of a subresource names the resource, its group and the subresource",
        ),
        pytest.param(
            {"verb": "APPLY", "resource": "modelreplicas", "group": MODELPLANE},
            "modelreplicas.modelplane.ai applies (APPLY)",
            id="a server-side apply is an apply, not a patch",
        ),
        pytest.param(
            {"verb": "POST", "resource": "events", "group": ""},
            "events creates (POST)",
            id="a create in the core group has no group",
        ),
        pytest.param(
            {"verb": "DELETE", "resource": "pods", "scope": "namespace"},
            "pods collection deletes (DELETE)",
            id="a delete of a namespace's collection is named apart",
        ),
        pytest.param(
            {"verb": "DELETE", "resource": "pods", "scope": "resource"},
            "pods deletes (DELETE)",
            id="a delete of one object",
        ),
        pytest.param(
            {"verb": "DELETECOLLECTION", "resource": "pods", "scope": "namespace"},
            "pods collection deletes (DELETECOLLECTION)",
            id="a request-info verb is a write of its own name",
        ),
    ],
)  # fmt: skip
def test_kind_of_a_write(labels, want):
    assert writes.kind_of(labels) == want


def test_every_write_verb_counts_whatever_its_code_or_dry_run_and_every_other_request_by_verb():
    counted = {
        tuple(sorted(labels.items())): value
        for value, labels in [
            (1.0, {"verb": "POST", "resource": "events", "code": "201"}),
            (2.0, {"verb": "PUT", "resource": "objects", "code": "409"}),
            (3.0, {"verb": "PATCH", "resource": "objects", "dry_run": "All"}),
            (4.0, {"verb": "APPLY", "resource": "objects"}),
            (5.0, {"verb": "DELETE", "resource": "objects", "scope": "resource"}),
            (6.0, {"verb": "CREATE", "resource": "events"}),
            (10.0, {"verb": "GET", "resource": "objects"}),
            (20.0, {"verb": "LIST", "resource": "objects"}),
            (30.0, {"verb": "WATCH", "resource": "objects"}),
            (40.0, {"verb": "CONNECT", "resource": "pods", "subresource": "exec"}),
            (50.0, {"verb": "other", "resource": ""}),
        ]
    }
    got = writes.Requests.of(counted)
    assert got.writes == {
        "events creates (POST)": 1.0,
        "objects updates (PUT)": 2.0,
        "objects patches (PATCH)": 3.0,
        "objects applies (APPLY)": 4.0,
        "objects deletes (DELETE)": 5.0,
        "events creates (CREATE)": 6.0,
    }
    assert got.other == {"GET": 10.0, "LIST": 20.0, "WATCH": 30.0, "CONNECT": 40.0, "other": 50.0}


LINE = re.compile(
    r"settled: replicas=(\d+) writes-per-replica-minute=(\S+) control-plane-cpu-s-per-minute=(\S+)"
)


@pytest.mark.parametrize(
    ("replicas", "writes_per_minute", "cpu", "want"),
    [
        pytest.param(
            200, 300.0, 14.04,
            "settled: replicas=200 writes-per-replica-minute=1.50 "
            "control-plane-cpu-s-per-minute=14.0",
            id="writes are divided by the replicas, CPU is the control plane's whole",
        ),
        pytest.param(
            0, 12.0, 3.0,
            "settled: replicas=0 writes-per-replica-minute=nan "
            "control-plane-cpu-s-per-minute=3.0",
            id="without replicas there is no figure per replica, and the line says nan",
        ),
    ],
)  # fmt: skip
def test_settled_line(replicas, writes_per_minute, cpu, want):
    line = writes.settled_line(replicas, writes_per_minute, cpu)
    assert line == want
    assert LINE.fullmatch(line)


def test_the_breakdown_names_the_first_windows_top_kinds_and_adds_up_to_every_request():
    now = writes.Column(
        writes.Requests({"a (PUT)": 30.0, "b (APPLY)": 20.0, "c (PATCH)": 20.0, "d (POST)": 5.0},
                        {"GET": 10.0}),
        replicas=10,
    )  # fmt: skip
    before = writes.Column(writes.Requests({"z (PUT)": 100.0, "b (APPLY)": 40.0}, {}), 20)
    got = writes.rows([now, before], top=2)
    assert got == [
        ("all write requests", ["7.50", "7.00"]),
        ("writes: a (PUT)", ["3.00", "0.00"]),
        ("writes: b (APPLY)", ["2.00", "2.00"]),
        ("writes: every other kind (not in the top 2)", ["2.50", "5.00"]),
        ("not writes: GET", ["1.00", "0.00"]),
    ]


def test_a_window_between_two_scrapes_reads_as_the_issue_states_its_figures():
    """100 replicas, 3 minutes: 8.8 Object status updates, 5.0 Object applies, 4.8
    ModelReplica applies and 1.2 ModelReplica status applies per replica-minute."""
    objects_apply = dict(verb="APPLY", resource="objects", group=OBJECTS)
    replica_apply = dict(verb="APPLY", resource="modelreplicas", group=MODELPLANE)
    start = _scrape(
        _line(1000, **STATUS_PUT),
        _line(500, **objects_apply),
        _line(70, **replica_apply, subresource="status"),
        _line(9000, "LIST", "modelreplicas", MODELPLANE, scope="namespace"),
    )
    end = _scrape(
        _line(1000 + 2640, **STATUS_PUT),
        _line(500 + 1500, **objects_apply),
        _line(1440, **replica_apply),
        _line(70 + 360, **replica_apply, subresource="status"),
        _line(9000 + 600, "LIST", "modelreplicas", MODELPLANE, scope="namespace"),
    )
    window = settled.Window.between(
        "w", _reading(0.0, start, {"crossplane": 0.0}), _reading(180.0, end, {"crossplane": 27.0})
    )
    window = settled.replace(window, replicas=100)
    breakdown = dict(writes.rows([window.column()]))
    assert breakdown["all write requests"] == ["19.80"]
    assert breakdown["writes: objects.kubernetes.m.crossplane.io/status updates (PUT)"] == ["8.80"]
    assert breakdown["writes: objects.kubernetes.m.crossplane.io applies (APPLY)"] == ["5.00"]
    assert breakdown["writes: modelreplicas.modelplane.ai applies (APPLY)"] == ["4.80"]
    assert breakdown["writes: modelreplicas.modelplane.ai/status applies (APPLY)"] == ["1.20"]
    assert breakdown["not writes: LIST"] == ["2.00"]
    assert window.settled_line([]) == (
        "settled: replicas=100 writes-per-replica-minute=19.80 control-plane-cpu-s-per-minute=9.0"
    )


def _reading(at: float, text: str, cpu: dict[str, float]) -> settled.Reading:
    return settled.Reading(
        at=at, cpu=cpu, requests={}, call_seconds={}, reconciles={}, wire={},
        api_requests=writes.requests(text),
    )  # fmt: skip
