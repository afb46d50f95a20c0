"""Device quotas under concurrency (hypothesis): a namespace never exceeds its quota.

Several deployments of one namespace plan at about the same time, each from
the same fleet listing (none sees the others' new replicas: the race the
commit point exists for). Each plan alone keeps under the quota; admission
then judges every new replica through compose-model-replica's own shell
(capacity is ample, so only the quota can refuse). Properties:

- Each plan's new devices, with what the namespace already holds, fit the
  quota (or it places nothing new).
- The replicas admitted, with the namespace's already admitted ones, never
  claim more devices of the class than the quota allows.
- Admission is not needlessly strict: the first new replica in queue order
  is admitted whenever it fits behind the admitted ones alone.
"""

from __future__ import annotations

from datetime import timedelta

import compose_model_deployment as scheduler
from compose_model_replica.fn import FunctionRunner
from compose_model_replica.readers import (
    CLUSTER_REQUIREMENT,
    NAMESPACE_REPLICAS_REQUIREMENT,
    QUOTAS_REQUIREMENT,
    REPLICAS_REQUIREMENT,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane_common.capacity.admission import ADMITTED
from modelplane_testkit import admission_builders as a
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import desired_status, request, run

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = t.NOW
GPU = "gpu.example.com"
CLUSTERS = [
    t.cluster(
        name, [t.pool("h100", 16, histogram=[({"gpu": 8}, 16)], observed_at=t.ago(seconds=1))]
    )
    for name in ("east", "west")
]


@st.composite
def races(draw):
    quota = draw(st.integers(0, 40))
    held = [
        a.in_flight(f"old{i}-0", NOW - timedelta(hours=1), gpus=g, verdict=ADMITTED, cluster=c)
        for i, (g, c) in enumerate(
            draw(
                st.lists(
                    st.tuples(st.sampled_from([1, 4, 8]), st.sampled_from(["east", "west"])),
                    max_size=3,
                )
            )
        )
    ]
    deployments = [
        (
            t.deployment(
                f"d{i}",
                replicas=draw(st.integers(1, 4)),
                engines=[t.standalone(gpus=draw(st.sampled_from([1, 2, 4, 8])))],
            ),
            NOW + timedelta(seconds=draw(st.integers(0, 3))),  # ties happen
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    return quota, held, deployments


def gpus_of(body) -> int:
    return sum(
        m.get("deviceRequests", [{}])[0].get("count", 0)
        for e in body["spec"]["engines"]
        for m in e["members"]
    )


def plans(quota_objects, held, deployments):
    """Every deployment plans from the same listing: the devices each places anew, and
    every new replica as the deployment composes it."""
    news, bodies = [], []
    for xr, now in deployments:
        spec = scheduler.read_deployment(xr)
        plan = t.schedule(xr, CLUSTERS, others=held, now=now, quotas=quota_objects)
        mine = [scheduler.model_replica(spec, r) for r in plan.replicas]
        news.append(sum(gpus_of(b) for b in mine))
        bodies.extend(mine)
    return news, bodies


def verdict(me, fleet, quota_objects):
    cluster = me["spec"]["clusterName"]
    required = {
        CLUSTER_REQUIREMENT: [next(c for c in CLUSTERS if c["metadata"]["name"] == cluster)],
        REPLICAS_REQUIREMENT: [b for b in fleet if b["spec"]["clusterName"] == cluster],
        QUOTAS_REQUIREMENT: quota_objects,
        NAMESPACE_REPLICAS_REQUIREMENT: fleet,
    }
    later = NOW + timedelta(minutes=1)  # past every replica's commit delay
    rsp = run(FunctionRunner(clock=lambda: later), request(me, {}, required))
    return (desired_status(rsp).get("admission") or {}).get("verdict")


@SETTINGS
@given(races())
def test_one_namespace_never_exceeds_its_quota(race):
    quota, held, deployments = race
    quota_objects = [t.device_quota({GPU: quota})]
    already = sum(gpus_of(b) for b in held)
    news, new_bodies = plans(quota_objects, held, deployments)
    assert all(new == 0 or already + new <= quota for new in news)
    fleet = [*held, *new_bodies]
    admitted = [b for b in new_bodies if verdict(b, fleet, quota_objects) == ADMITTED]
    assert already + sum(gpus_of(b) for b in admitted) <= max(quota, already)
    if already >= quota:
        assert admitted == []
    first = min(
        new_bodies,
        key=lambda b: (
            b["metadata"]["annotations"]["modelplane.ai/placed-at"],
            b["metadata"]["namespace"],
            b["metadata"]["name"],
        ),
        default=None,
    )
    if first is not None and already + gpus_of(first) <= quota:
        assert first in admitted
