"""The admission core, one rule per case: who is admitted behind whom (design/admission.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from compose_model_replica import admission
from crossplane.function import resource
from modelplane_common.capacity.admission import (
    ADMITTED,
    OVERCOMMITTED,
    WAITING,
    Record,
    record_from_status,
)
from modelplane_common.capacity.readers import read_engines
from modelplane_testkit import admission_builders as a
from modelplane_testkit import deployment_builders as t

NOW = t.NOW
OLD = NOW - timedelta(minutes=1)
OLDER = NOW - timedelta(minutes=2)


def one_free_node(**kwargs) -> dict:
    """east/h100: two 8-GPU nodes, one of them free, observed a second ago."""
    return t.cluster(
        "east",
        [
            t.pool(
                "h100",
                2,
                histogram=[({"gpu": 8}, 1), ({"gpu": 0}, 1)],
                observed_at=t.ago(seconds=1),
                **kwargs,
            )
        ],
    )


def stale_two_nodes(fallback: str | None = None) -> dict:
    """east/h100: two 8-GPU nodes, its report 20 minutes old: counted by its fallback
    (whole-node accounting unless `fallback` says otherwise)."""
    return t.cluster(
        "east",
        [t.pool("h100", 2, histogram=[({"gpu": 8}, 2)], observed_at=t.ago(20), fallback=fallback)],
    )


def declared_by_devices() -> dict:
    """east/h100: two 8-GPU nodes, Declared, counted by devices: 16 GPUs minus claims."""
    return t.cluster("east", [t.pool("h100", 2)], mode="Declared", fallback="DeviceCount")


def verdict_of(name, bodies, cluster=None, now=NOW):
    queue = a.queue(bodies)
    mine = next(q for q in queue if q.charge.name == name)
    placement = next(b for b in bodies if b["metadata"]["name"] == name)["metadata"]["annotations"][
        "modelplane.ai/placed-at"
    ]
    return admission.judge(
        admission.Applicant(
            mine, placement, previous=None, has_workloads=False, shape=mine.charge.engines
        ),
        a.fleet_cluster(cluster or one_free_node()),
        queue,
        now,
    )


CASES = [
    pytest.param(
        "x-0", [a.in_flight("x-0", OLD)], None, ADMITTED, id="alone on a free node: admitted"
    ),
    pytest.param(
        "x-0",
        [a.in_flight("x-0", OLDER), a.in_flight("y-0", OLD)],
        None,
        ADMITTED,
        id="of two on the last node, the one placed first is admitted",
    ),
    pytest.param(
        "y-0",
        [a.in_flight("x-0", OLDER), a.in_flight("y-0", OLD)],
        None,
        OVERCOMMITTED,
        id="of two on the last node, the one placed later is overcommitted",
    ),
    pytest.param(
        "b-0",
        [a.in_flight("b-0", OLD, namespace="team-b"), a.in_flight("a-0", OLD, namespace="team-b")],
        None,
        OVERCOMMITTED,
        id="placed in the same second: the name decides",
    ),
    pytest.param(
        "z-0",
        [a.in_flight("z-0", OLD, namespace="a"), a.in_flight("a-0", OLD, namespace="b")],
        None,
        ADMITTED,
        id="placed in the same second: the namespace decides before the name",
    ),
    pytest.param(
        "y-0",
        [a.in_flight("x-0", NOW - timedelta(days=1), verdict=ADMITTED), a.in_flight("y-0", OLD)],
        None,
        OVERCOMMITTED,
        id="an admitted replica not yet in the histogram holds its node",
    ),
    pytest.param(
        "y-0",
        [
            a.in_flight(
                "x-0",
                OLDER,
                verdict=ADMITTED,
                pods_scheduled=True,
                scheduled_at=t.ago(seconds=30),
            ),
            a.in_flight("y-0", OLD),
        ],
        None,
        ADMITTED,
        id="an admitted replica the histogram contains is not charged twice",
    ),
    pytest.param(
        "y-0",
        [a.in_flight("x-0", OLDER, verdict=OVERCOMMITTED), a.in_flight("y-0", OLD)],
        None,
        ADMITTED,
        id="an overcommitted replica ahead holds nothing",
    ),
    pytest.param(
        "y-0",
        [
            a.in_flight("x-0", OLDER, role="Gang", gpus=8, workers=2),
            a.in_flight("y-0", OLD),
        ],
        None,
        ADMITTED,
        id="a replica ahead that does not fit itself is skipped",
    ),
    pytest.param(
        "y-0",
        [a.in_flight("x-0", OLD), a.in_flight("y-0", OLDER)],
        None,
        ADMITTED,
        id="a replica placed after it is not ahead of it",
    ),
    pytest.param(
        "y-0",
        [a.in_flight("x-0", OLDER, gpus=1, verdict=ADMITTED), a.in_flight("y-0", OLD, gpus=1)],
        stale_two_nodes(),
        ADMITTED,
        id="whole-node accounting: a 1-GPU replica takes a node, the second node is free",
    ),
    pytest.param(
        "z-0",
        [
            a.in_flight("x-0", OLDER, gpus=1, verdict=ADMITTED),
            a.in_flight("y-0", OLDER, gpus=1),
            a.in_flight("z-0", OLD, gpus=1),
        ],
        stale_two_nodes(),
        OVERCOMMITTED,
        id="whole-node accounting: the third 1-GPU replica on two nodes is overcommitted",
    ),
    pytest.param(
        "z-0",
        [
            a.in_flight("x-0", OLDER, gpus=1, verdict=ADMITTED),
            a.in_flight("y-0", OLDER, gpus=1),
            a.in_flight("z-0", OLD, gpus=1),
        ],
        stale_two_nodes("DeviceCount"),
        ADMITTED,
        id="device-count accounting: the third 1-GPU replica on two stale nodes is admitted",
    ),
    pytest.param(
        "z-0",
        [
            a.in_flight("x-0", OLDER, gpus=8, verdict=ADMITTED),
            a.in_flight("y-0", OLDER, gpus=4),
            a.in_flight("z-0", OLD, gpus=4),
        ],
        declared_by_devices(),
        ADMITTED,
        id="device-count accounting: 8 + 4 + 4 GPUs are the 16 declared",
    ),
    pytest.param(
        "z-0",
        [
            a.in_flight("x-0", OLDER, gpus=8, verdict=ADMITTED),
            a.in_flight("y-0", OLDER, gpus=4),
            a.in_flight("z-0", OLD, gpus=6),
        ],
        declared_by_devices(),
        OVERCOMMITTED,
        id="device-count accounting: 6 more GPUs behind 8 + 4 of 16 are overcommitted",
    ),
    pytest.param(
        "x-0",
        [a.in_flight("x-0", NOW - timedelta(seconds=3))],
        None,
        WAITING,
        id="younger than the commit delay: waits",
    ),
]


@pytest.mark.parametrize(("name", "bodies", "cluster", "expected"), CASES)
def test_verdict(name, bodies, cluster, expected):
    assert verdict_of(name, bodies, cluster).reason == expected


def test_overcommitted_names_the_pool_and_the_shortfall():
    verdict = verdict_of("y-0", [a.in_flight("x-0", OLDER), a.in_flight("y-0", OLD)])
    assert verdict.message == (
        "engine serve does not fit pool h100 behind the 1 replica(s) of the cluster placed "
        "before it: it claims 8 gpu device(s), 0 free (too few free devices)"
    )
    assert verdict.record is not None and verdict.record.message == verdict.message


def test_a_gang_short_of_nodes_says_how_many_nodes_have_room():
    bodies = [a.in_flight("x-0", OLD, role="Gang", gpus=4, workers=2)]
    cluster = t.cluster(
        "east",
        [
            t.pool(
                "h100",
                2,
                histogram=[({"gpu": 8}, 1), ({"gpu": 0}, 1)],
                observed_at=t.ago(seconds=1),
            )
        ],
    )
    verdict = verdict_of("x-0", bodies, cluster)
    assert verdict.reason == OVERCOMMITTED
    assert verdict.message.endswith(
        "its 3 pod(s) need nodes with room, 1 node(s) have room for the largest "
        "(too few nodes with room)"
    )


DEVICE_COUNT_SHORTFALLS = [
    pytest.param(
        [
            a.in_flight("w-0", OLDER, gpus=8, verdict=ADMITTED),
            a.in_flight("x-0", OLDER, gpus=4, verdict=ADMITTED),
            a.in_flight("y-0", OLD, gpus=6),
        ],
        "engine serve does not fit pool h100 on the cluster's admitted replicas: "
        "it claims 6 gpu device(s), 4 free (too few free devices)",
        id="the shortfall counts the declared devices minus the admitted claims",
    ),
    pytest.param(
        [a.in_flight("y-0", OLD, role="Gang", gpus=1, workers=2)],
        "engine serve does not fit pool h100 on the cluster's admitted replicas: its 3 pod(s) "
        "need nodes with room, 2 node(s) have room for the largest (too few nodes with room)",
        id="a gang of three on two nodes is short of nodes, not of devices",
    ),
]


@pytest.mark.parametrize(("bodies", "message"), DEVICE_COUNT_SHORTFALLS)
def test_device_count_shortfalls_say_what_was_counted(bodies, message):
    verdict = verdict_of("y-0", bodies, declared_by_devices())
    assert (verdict.reason, verdict.message) == (OVERCOMMITTED, message)


def test_a_replica_in_its_commit_delay_is_asked_back_when_it_is_over():
    verdict = verdict_of("x-0", [a.in_flight("x-0", NOW - timedelta(seconds=3))])
    assert verdict.retry_after == admission.COMMIT_DELAY - timedelta(seconds=3)
    assert verdict.record is None


def judge_alone(previous=None, has_workloads=False, cluster=True, others=True, problem=None):
    body = a.in_flight("x-0", OLD)
    placement = body["metadata"]["annotations"]["modelplane.ai/placed-at"]
    blocker = a.in_flight("w-0", OLDER)  # takes the only free node
    return admission.judge(
        admission.Applicant(
            a.queued(body),
            placement,
            previous=previous,
            has_workloads=has_workloads,
            problem=problem,
        ),
        a.fleet_cluster(one_free_node()) if cluster else None,
        a.queue([blocker, body]) if others else None,
        NOW,
    )


PLACED = t.ago(1)


@pytest.mark.parametrize(
    ("kwargs", "expected", "message_part"),
    [
        pytest.param({}, OVERCOMMITTED, "does not fit", id="judged behind the blocker"),
        pytest.param(
            {"previous": Record(PLACED, ADMITTED, NOW - timedelta(minutes=1))},
            ADMITTED,
            "admitted",
            id="admitted is sticky for its placement, whatever the queue says now",
        ),
        pytest.param(
            {"previous": Record("2025-06-01T10:00:00Z", ADMITTED)},
            OVERCOMMITTED,
            "does not fit",
            id="a verdict for an earlier placement binds nothing",
        ),
        pytest.param(
            {"has_workloads": True},
            ADMITTED,
            "its workloads already exist",
            id="a replica already running is admitted (upgrade)",
        ),
        pytest.param(
            {"cluster": False},
            WAITING,
            "InferenceCluster cannot be read",
            id="unreadable cluster: waits",
        ),
        pytest.param(
            {"others": False},
            WAITING,
            "ModelReplicas are not fetched",
            id="the cluster's replicas not fetched: waits",
        ),
        pytest.param(
            {"problem": "its spec is invalid"},
            WAITING,
            "its spec is invalid",
            id="an input problem: waits",
        ),
    ],
)
def test_judge_inputs(kwargs, expected, message_part):
    verdict = judge_alone(**kwargs)
    assert verdict.reason == expected
    assert message_part in verdict.message


def test_an_admitted_record_is_written_for_the_placement_with_its_time_and_shape():
    body = a.in_flight("x-0", OLD)
    verdict = verdict_of("x-0", [body])
    shape = a.queued(body).charge.engines
    assert verdict.record == Record(t.ago(1), ADMITTED, NOW, charged=shape)
    assert verdict.record.to_wire() == {
        "placedAt": t.ago(1),
        "verdict": ADMITTED,
        "decidedAt": "2025-06-01T12:00:00Z",
        "charged": {
            "engines": [
                {
                    "name": "serve",
                    "copies": 1,
                    "members": [
                        {
                            "role": "Standalone",
                            "nodePoolName": "h100",
                            "deviceRequests": [
                                {"name": "gpu", "deviceClassName": "gpu.example.com", "count": 8}
                            ],
                        }
                    ],
                }
            ]
        },
    }


def _admitted(name, placed_at, pods_created=None):
    body = a.in_flight(name, placed_at, verdict=ADMITTED)
    if pods_created is not None:
        body["status"].setdefault("conditions", []).append(
            {"type": "PodsCreated", "status": "False", "reason": pods_created}
        )
    return body


@pytest.mark.parametrize(
    ("pods_created", "expected"),
    [
        pytest.param("NotCreated", ADMITTED, id="behind a replica whose pods were refused: in"),
        pytest.param("Creating", OVERCOMMITTED, id="behind one still within its grace: not"),
    ],
)
def test_a_replica_whose_pods_were_refused_past_the_grace_holds_no_room(pods_created, expected):
    bodies = [_admitted("x-0", OLDER, pods_created), a.in_flight("y-0", OLD)]
    assert verdict_of("y-0", bodies).reason == expected


def orphan(**fields) -> dict:
    """x-0, placed before y-0, orphaned (its deployment deleted with --cascade=orphan)."""
    return a.in_flight("x-0", OLDER, pods_created="Orphaned", **fields)


@pytest.mark.parametrize(
    ("fellow", "cluster", "expected"),
    [
        pytest.param(
            orphan(), None, ADMITTED, id="an orphan still waiting for its verdict holds no room"
        ),
        pytest.param(orphan(verdict=ADMITTED), None, ADMITTED, id="an admitted orphan holds none"),
        pytest.param(
            orphan(copies=2, verdict=ADMITTED, charged_copies=1, grown_at=OLDER),
            declared_by_devices(),
            ADMITTED,
            id="an orphan admitted at 1 copy, its growth to 2 in flight, holds neither",
        ),
        pytest.param(
            orphan(copies=2),
            declared_by_devices(),
            ADMITTED,
            id="an orphan whose record is gone holds none of its whole spec",
        ),
        pytest.param(
            a.in_flight(
                "x-0",
                OLDER,
                copies=2,
                verdict=ADMITTED,
                charged_copies=1,
                grown_at=OLDER,
                pods_created="NotCreated",
            ),
            declared_by_devices(),
            ADMITTED,
            id="a replica refused its pods past the grace holds neither its shape nor its growth",
        ),
        pytest.param(
            a.in_flight("x-0", OLDER, copies=2, pods_created="Creating"),
            declared_by_devices(),
            OVERCOMMITTED,
            id="one within its grace waiting ahead still takes its room",
        ),
    ],
)
def test_a_released_replica_holds_no_room_in_any_replay(fellow, cluster, expected):
    """y-0 asks for 2 copies of 8 GPUs: the cluster's 16 (the e2e's declared pool), or the
    one free node of 8 when y-0 asks for 1 (cluster None)."""
    copies = 2 if cluster is not None else 1
    bodies = [fellow, a.in_flight("y-0", OLD, copies=copies)]
    assert verdict_of("y-0", bodies, cluster).reason == expected


# --- a verdict binds the shape it charged: a growth is judged for what it adds ---------------


def judge_growth(me: dict, fellows: list[dict]) -> admission.AdmissionVerdict:
    """me-0's verdict, its record read as compose-model-replica reads its own status."""
    mine = a.queued(me)
    placement = me["metadata"]["annotations"]["modelplane.ai/placed-at"]
    return admission.judge(
        admission.Applicant(
            mine,
            placement,
            previous=record_from_status(me["status"]),
            has_workloads=True,
            shape=read_engines(resource.dict_to_struct(me["spec"])),
        ),
        a.fleet_cluster(one_free_node()),
        a.queue([me, *fellows]),
        NOW,
    )


def running(copies: int, charged: int, **fields) -> dict:
    """me-0: Admitted at `charged` copies of 8 GPUs, running and counted by the histogram
    (scheduled before the observation), its spec now at `copies`, its growth seen OLD."""
    return a.in_flight(
        "me-0",
        OLDER,
        copies=copies,
        verdict=ADMITTED,
        charged_copies=charged,
        grown_at=OLD,
        pods_scheduled=True,
        scheduled_at=t.ago(5),
        **fields,
    )


@pytest.mark.parametrize(
    ("me", "fellows", "expected"),
    [
        pytest.param(
            running(2, 1),
            [],
            ADMITTED,
            id="one more copy on the one free node: only the added copy is placed",
        ),
        pytest.param(
            running(3, 1),
            [],
            OVERCOMMITTED,
            id="two more copies on the one free node do not fit, though it already runs",
        ),
        pytest.param(
            running(2, 1),
            [a.in_flight("x-0", OLDER - timedelta(minutes=1))],
            OVERCOMMITTED,
            id="a replica placed before the growth was seen takes the free node first",
        ),
        pytest.param(
            running(2, 1),
            [a.in_flight("x-0", NOW - timedelta(seconds=30))],
            ADMITTED,
            id="a replica placed after the growth was seen is behind it",
        ),
    ],
)
def test_a_growth_is_judged_for_what_it_adds_in_its_queue_place(me, fellows, expected):
    assert judge_growth(me, fellows).reason == expected


def grown_fellow(grown_at=None) -> dict:
    """g-0: Admitted at 1 copy, running and counted by the histogram, now at 2 copies."""
    fields = {"grown_at": grown_at} if grown_at is not None else {}
    return a.in_flight(
        "g-0",
        OLDER - timedelta(minutes=1),
        copies=2,
        verdict=ADMITTED,
        charged_copies=1,
        pods_scheduled=True,
        scheduled_at=t.ago(5),
        **fields,
    )


@pytest.mark.parametrize(
    ("fellow", "expected"),
    [
        pytest.param(
            grown_fellow(OLDER), OVERCOMMITTED, id="a fellow's growth seen before I was placed"
        ),
        pytest.param(
            grown_fellow(NOW - timedelta(seconds=30)),
            ADMITTED,
            id="a fellow's growth seen after I was placed waits behind me",
        ),
        pytest.param(grown_fellow(), ADMITTED, id="a fellow's growth not yet seen is queued last"),
    ],
)
def test_a_fellows_growth_never_jumps_the_queue(fellow, expected):
    assert verdict_of("x-0", [a.in_flight("x-0", OLD), fellow]).reason == expected
