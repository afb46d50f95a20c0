"""Properties of admission on random queues (hypothesis).

- Every replica's verdict is the same whatever order its fellow replicas
  arrive in (Crossplane lists them sorted, but nothing may rely on it).
- The replicas admitted from one snapshot never double-book: together with
  the already admitted ones they fit the pool at once, on the scheduler's
  own ledger.
- The queue order is a total order: shuffled, it sorts back the same.
- On a cluster whose pools are all freshly observed, the replicas labelled
  pending (capacity/charge_label.py, judged by the deployments against the
  same or an older observation) give every replica the verdict that all
  of the cluster's replicas give: reading only them loses nothing.
"""

from __future__ import annotations

from datetime import timedelta

from compose_model_replica import admission
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, queue_order
from modelplane_common.capacity.charge_label import counted_by_pools, reads_pending_only
from modelplane_common.capacity.pools import charge_replicas, empty_ledger, place_engine
from modelplane_testkit import admission_builders as a
from modelplane_testkit import deployment_builders as t

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = t.NOW


def _shape(draw) -> dict:
    """A replica's namespace and engine shape, as admission_builders.in_flight's fields."""
    return {
        "namespace": draw(st.sampled_from(["a", "b"])),
        "gpus": draw(st.sampled_from([1, 2, 4, 8])),
        "role": "Gang" if draw(st.booleans()) else "Standalone",
        "workers": draw(st.integers(1, 2)),
        "copies": draw(st.integers(1, 2)),
    }


@st.composite
def snapshots(draw):
    """A cluster of one pool, and up to 10 replicas placed in a handful of seconds."""
    nodes = draw(st.integers(1, 6))
    free = draw(st.lists(st.sampled_from([0, 2, 4, 8]), min_size=nodes, max_size=nodes))
    stale = draw(st.booleans())
    histogram = [({"gpu": f}, free.count(f)) for f in sorted(set(free))]
    cluster = t.cluster(
        "east",
        [
            t.pool(
                "h100",
                nodes,
                histogram=histogram,
                observed_at=t.ago(20) if stale else t.ago(seconds=1),
            )
        ],
    )
    count = draw(st.integers(1, 10))
    bodies = []
    for i in range(count):
        bodies.append(
            a.in_flight(
                f"d{i}-0",
                NOW - timedelta(seconds=30 + draw(st.integers(0, 3))),
                **_shape(draw),
                verdict=draw(st.sampled_from([None, None, None, ADMITTED, OVERCOMMITTED])),
            )
        )
    return cluster, bodies


def verdicts(cluster_body, bodies, read=None):
    """Each undecided replica's verdict; `read`, when given, picks the fellow replicas
    admission reads out of the cluster's queue."""
    cluster = a.fleet_cluster(cluster_body)
    queue = a.queue(bodies)
    fellows = queue if read is None else read(queue)
    out = {}
    for q, body in zip(queue, bodies, strict=True):
        if q.verdict is not None:
            continue  # already decided: sticky, not judged again
        placement = body["metadata"]["annotations"]["modelplane.ai/placed-at"]
        verdict = admission.judge(
            admission.Applicant(q, placement, previous=None, has_workloads=False),
            cluster,
            fellows,
            NOW,
        )
        out[q.key] = verdict.reason
    return out


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_verdicts_do_not_depend_on_input_order(snapshot, random):
    cluster, bodies = snapshot
    shuffled = list(bodies)
    random.shuffle(shuffled)
    assert verdicts(cluster, bodies) == verdicts(cluster, shuffled)


@SETTINGS
@given(snapshots())
def test_admitted_replicas_fit_together(snapshot):
    cluster_body, bodies = snapshot
    cluster = a.fleet_cluster(cluster_body)
    queue = a.queue(bodies)
    judged = verdicts(cluster_body, bodies)
    already = [q.charge for q in queue if q.verdict == ADMITTED]
    newly = sorted((q for q in queue if judged.get(q.key) == ADMITTED), key=queue_order)
    pool = cluster.pools[0]
    ledger, basis = empty_ledger(pool, cluster, NOW)
    charge_replicas(ledger, pool, basis, already)
    for q in newly:
        for engine in q.charge.engines:
            assert place_engine(ledger, pool, engine), f"{q.key} admitted but does not fit"


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_queue_order_is_total(snapshot, random):
    _, bodies = snapshot
    queue = a.queue(bodies)
    shuffled = list(queue)
    random.shuffle(shuffled)
    assert [q.key for q in sorted(shuffled, key=queue_order)] == [
        q.key for q in sorted(queue, key=queue_order)
    ]


def observed_cluster(nodes: int, free: list[int], observed_at: str) -> dict:
    histogram = [({"gpu": f}, free.count(f)) for f in sorted(set(free))]
    return t.cluster("east", [t.pool("h100", nodes, histogram=histogram, observed_at=observed_at)])


@st.composite
def labelled_snapshots(draw):
    """A freshly observed pool with in-flight and admitted replicas, some of them running
    (pods scheduled before or after the observation), and the older observation their
    deployments judged their charge labels against."""
    nodes = draw(st.integers(1, 6))
    free = draw(st.lists(st.sampled_from([0, 2, 4, 8]), min_size=nodes, max_size=nodes))
    observed = draw(st.integers(1, 20))  # seconds ago
    labelled = observed + draw(st.integers(0, 30))  # the deployments saw this, or older
    bodies = []
    for i in range(draw(st.integers(1, 10))):
        verdict = draw(st.sampled_from([None, None, ADMITTED, ADMITTED, OVERCOMMITTED]))
        running = verdict == ADMITTED and draw(st.booleans())
        bodies.append(
            a.in_flight(
                f"d{i}-0",
                NOW - timedelta(seconds=60 + draw(st.integers(0, 3))),
                **_shape(draw),
                verdict=verdict,
                pods_scheduled=running,
                scheduled_at=t.ago(seconds=draw(st.integers(0, 55))) if running else None,
            )
        )
    return (
        observed_cluster(nodes, free, t.ago(seconds=observed)),
        observed_cluster(nodes, free, t.ago(seconds=labelled)),
        bodies,
    )


@SETTINGS
@given(labelled_snapshots())
def test_the_pending_replicas_of_a_fresh_cluster_give_the_same_verdicts(snapshot):
    cluster_body, labelled_body, bodies = snapshot
    assert reads_pending_only(a.fleet_cluster(cluster_body), NOW)
    judged_by = a.fleet_cluster(labelled_body)

    def pending(queue):
        return [q for q in queue if not counted_by_pools(q.charge, judged_by, NOW)]

    assert verdicts(cluster_body, bodies, read=pending) == verdicts(cluster_body, bodies)
