"""compose-model-replica through the real `crossplane composition render`.

Every example replica in examples/renders.yaml is rendered against the
example cluster gpu-east (published with a status, as
compose-inference-cluster writes it) and, for the PodsScheduled cases, with
observed Objects carrying the agent's ReplicaObservation status. Each
rendered Object is validated against the provider-kubernetes CRD, each
embedded LeaderWorkerSet against the LWS v0.10.0 CRD, and the XR against
its XRD, all offline with `crossplane resource validate`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

ROOT = render.ROOT

CASES = {c["name"]: c for c in render.example_cases() if c["name"].startswith("replica-")}


def _docs(path: str, now: datetime) -> list[dict]:
    text = render.fill_time_tokens((ROOT / path).read_text(), now)
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="module")
def now() -> datetime:
    """The clock the time tokens are filled with, read when this module's renders run.

    The functions read the real clock a moment later, well inside every
    maxAge; read at import instead, it would be as old as every test that
    runs before this module.
    """
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(scope="module")
def rendered(functions, now) -> dict[str, list[dict]]:
    out = {}
    for name, case in CASES.items():
        out[name] = functions.render(
            ROOT / case["xr"],
            ROOT / case["composition"],
            observed=_docs(case["observed"], now) if case.get("observed") else None,
            required=[d for path in case.get("required", []) for d in _docs(path, now)] or None,
        )
    return out


def objects(docs: list[dict]) -> dict[str, dict]:
    """Rendered Objects by composition resource name."""
    return {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: o
        for o in by_kind(docs, "Object")
    }


def manifest(docs: list[dict], resource_name: str) -> dict:
    return objects(docs)[resource_name]["spec"]["forProvider"]["manifest"]


def test_every_replica_example_is_rendered():
    assert set(CASES) >= {
        "replica-single-gpu",
        "replica-eight-gpu",
        "replica-leader-workers",
        "replica-prefill-decode",
    }


@pytest.mark.parametrize(
    ("case", "status", "reason", "pods"),
    [
        ("replica-single-gpu", "Unknown", "NotObserved", {"expected": 2}),
        (
            "replica-single-gpu-pending",
            "False",
            "PodsPending",
            {"expected": 2, "observed": 2, "scheduled": 1},
        ),
        ("replica-eight-gpu-stale", "Unknown", "NotObserved", {"expected": 1}),
        (
            "replica-leader-workers-partial-gang",
            "False",
            "WaitingForPods",
            {"expected": 3, "observed": 1, "scheduled": 1},
        ),
        (
            "replica-leader-workers-scheduled",
            "True",
            "AllPodsScheduled",
            {"expected": 3, "observed": 3, "scheduled": 3},
        ),
        (
            "replica-prefill-decode-unschedulable",
            "False",
            "Unschedulable",
            {"expected": 2, "observed": 2, "scheduled": 1},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_pods_scheduled_is_relayed_from_the_agent(rendered, case, status, reason, pods):
    xr = composite(rendered[case])
    pods_scheduled = condition(xr, "PodsScheduled")
    assert (pods_scheduled["status"], pods_scheduled["reason"]) == (status, reason)
    # An admitted replica with too few pods remembers since when (PodsCreated): a time.
    published = dict(xr["status"]["pods"])
    missing_since = published.pop("missingSince", None)
    assert published == pods
    too_few = pods.get("observed", pods["expected"]) < pods["expected"]
    admitted = xr["status"].get("admission", {}).get("verdict") == "Admitted"
    assert (missing_since is not None) is (too_few and admitted)


@pytest.mark.parametrize(
    ("current", "until", "status", "reason"),
    [
        pytest.param(
            True,
            timedelta(minutes=20),
            "True",
            "AllPodsScheduled",
            id="its cluster vouching for every replica report keeps the unchanged report fresh",
        ),
        pytest.param(
            False,
            timedelta(minutes=20),
            "Unknown",
            "NotObserved",
            id="its cluster judging the agent's word stale vouches for nothing",
        ),
        pytest.param(
            True,
            -timedelta(minutes=1),
            "Unknown",
            "NotObserved",
            id="a word whose lease lapsed vouches for nothing",
        ),
    ],
)
def test_a_report_the_agent_no_longer_rewrites_is_fresh_while_its_cluster_vouches_for_it(
    functions, now, current, until, status, reason
):
    """replica-eight-gpu-stale's report is 20 minutes old: the agent writes a replica report
    only when it changes, and its cluster's verdict says whether it still holds."""
    case = CASES["replica-eight-gpu-stale"]
    clusters = [d for path in case["required"] for d in _docs(path, now)]
    for cluster in clusters:
        if cluster["metadata"]["name"] == "gpu-east":
            cluster["status"]["agent"]["replicasCurrent"] = current
            cluster["status"]["agent"]["vouchedUntil"] = format_time(now + until)
    docs = functions.render(
        ROOT / case["xr"],
        ROOT / case["composition"],
        observed=_docs(case["observed"], now),
        required=clusters,
    )
    pods_scheduled = condition(composite(docs), "PodsScheduled")
    assert (pods_scheduled["status"], pods_scheduled["reason"]) == (status, reason)


def test_all_scheduled_relays_the_agents_transition_time_as_scheduled_at(rendered, now):
    xr = composite(rendered["replica-leader-workers-scheduled"])
    assert xr["status"]["scheduledAt"] == format_time(now - timedelta(minutes=2))


@pytest.mark.parametrize(
    "case",
    [
        "replica-single-gpu-pending",
        "replica-eight-gpu-stale",
        "replica-leader-workers-partial-gang",
        "replica-prefill-decode-unschedulable",
    ],
)
def test_scheduled_at_is_absent_unless_all_pods_are_scheduled(rendered, case):
    assert "scheduledAt" not in composite(rendered[case])["status"]


def test_stale_observation_names_the_clusters_max_age(rendered):
    message = condition(composite(rendered["replica-eight-gpu-stale"]), "PodsScheduled")["message"]
    assert message == "the agent's report is older than 5m"


def test_unschedulable_names_the_engine_and_quotes_the_scheduler(rendered):
    docs = rendered["replica-prefill-decode-unschedulable"]
    message = condition(composite(docs), "PodsScheduled")["message"]
    assert message.startswith("engine decode: pod inference/qwen-pd-0-decode-")
    assert "0/16 nodes are available" in message
    warnings = [r["message"] for r in results(docs) if r.get("severity") == "Warning"]
    assert any("pods are unschedulable: engine decode: pod inference/" in w for w in warnings)


def test_workloads_ready_says_which_engine_is_not_available(rendered):
    xr = composite(rendered["replica-prefill-decode-unschedulable"])
    ready = condition(xr, "WorkloadsReady")
    assert (ready["status"], ready["reason"]) == ("False", "WorkloadsNotReady")
    assert ready["message"] == (
        "engine decode: the Deployment is not Available: "
        "Deployment does not have minimum availability."
    )
    assert xr["status"]["engines"] == [
        {"name": "prefill", "ready": True, "message": "available"},
        {
            "name": "decode",
            "ready": False,
            "message": "the Deployment is not Available: "
            "Deployment does not have minimum availability.",
        },
    ]


def test_available_gang_is_ready(rendered):
    xr = composite(rendered["replica-leader-workers-scheduled"])
    assert condition(xr, "WorkloadsReady")["reason"] == "AllWorkloadsReady"


@pytest.mark.parametrize(
    ("case", "engine", "kind", "pools"),
    [
        ("replica-single-gpu", "serve", "Deployment", ["l40s"]),
        ("replica-eight-gpu", "serve", "Deployment", ["h100"]),
        ("replica-leader-workers", "serve", "LeaderWorkerSet", ["h100", "h100"]),
        ("replica-prefill-decode", "prefill", "Deployment", ["h100"]),
        ("replica-prefill-decode", "decode", "Deployment", ["h100"]),
    ],
)
def test_each_engine_runs_as_its_workload_on_its_pool(rendered, case, engine, kind, pools):
    workload = manifest(rendered[case], f"gpu-east/{engine}/workload")
    assert workload["kind"] == kind
    assert workload["metadata"]["namespace"] == "inference"
    if kind == "Deployment":
        templates = [workload["spec"]["template"]]
    else:
        lwt = workload["spec"]["leaderWorkerTemplate"]
        templates = [lwt["leaderTemplate"], lwt["workerTemplate"]]
    assert [t["spec"]["nodeSelector"][labels.POOL] for t in templates] == pools
    for template in templates:
        assert template["metadata"]["labels"][labels.ENGINE] == engine
        assert template["metadata"]["labels"][labels.REPLICA_NAMESPACE] == "inference"


def test_leader_and_workers_of_one_copy_repel_each_other_per_node(rendered):
    lws = manifest(rendered["replica-leader-workers"], "gpu-east/serve/workload")
    assert lws["spec"]["replicas"] == 1
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 3
    for role in ("leaderTemplate", "workerTemplate"):
        terms = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert terms == [
            {
                "labelSelector": {
                    "matchLabels": {
                        labels.REPLICA: "deepseek-r1-0",
                        labels.REPLICA_NAMESPACE: "inference",
                        labels.ENGINE: "serve",
                    }
                },
                "matchLabelKeys": [labels.LWS_GROUP_KEY],
                "topologyKey": "kubernetes.io/hostname",
            }
        ]


def test_observation_selects_exactly_the_replicas_pods(rendered):
    observation = manifest(rendered["replica-prefill-decode"], "gpu-east/observation")
    assert observation["kind"] == "ReplicaObservation"
    assert observation["metadata"]["namespace"] == "inference"
    assert observation["spec"]["selector"]["matchLabels"] == {
        labels.REPLICA: "qwen-pd-0",
        labels.REPLICA_NAMESPACE: "inference",
    }


def test_missing_cluster_keeps_the_running_workloads(rendered):
    docs = rendered["replica-prefill-decode-cluster-missing"]
    composed = condition(composite(docs), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", "ClusterNotFound")
    kept = {name: o["metadata"]["name"] for name, o in objects(docs).items()}
    assert kept == {
        "gpu-east/observation": "qwen-pd-0-gpu-east-pods-18e9a1",
        "gpu-east/decode/workload": "qwen-pd-0-gpu-east-decode-dfd63d",
        "gpu-east/prefill/workload": "qwen-pd-0-gpu-east-prefill-768e8f",
    }
    # The agent's report is still relayed while the cluster is unresolved.
    assert condition(composite(docs), "PodsScheduled")["reason"] == "Unschedulable"


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_resources_validate_against_their_schemas(rendered, api_extensions, case):
    docs = rendered[case]
    embedded = [
        o["spec"]["forProvider"]["manifest"]
        for o in by_kind(docs, "Object")
        if o["spec"]["forProvider"]["manifest"]["kind"] == "LeaderWorkerSet"
    ]
    resources = [composite(docs), *by_kind(docs, "Object"), *embedded]
    done = render.validate(api_extensions, resources)
    assert done.returncode == 0, done.stdout + done.stderr
    if case.startswith("replica-leader-workers"):
        assert embedded, "a gang renders a LeaderWorkerSet to validate"


def test_a_template_named_by_digest_is_rendered_from_the_required_deployment(rendered, now):
    (deployment,) = _docs("examples/replicas/single-gpu-deployment.yaml", now)
    member = deployment["spec"]["template"]["spec"]["engines"][0]["members"][0]
    workload = manifest(rendered["replica-single-gpu"], "gpu-east/serve/workload")
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    (wanted,) = member["template"]["spec"]["containers"]
    assert (container["image"], container["args"]) == (wanted["image"], wanted["args"])
    composed = condition(composite(rendered["replica-single-gpu"]), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("True", "Composed")


def test_a_deployment_edited_since_its_digest_keeps_every_workload_as_observed(rendered, now):
    docs = rendered["replica-single-gpu-template-edited"]
    composed = condition(composite(docs), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", "TemplateDigestMismatch")
    assert "members[0] (Standalone).templateDigest: is not the digest of" in composed["message"]
    observed = {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: o
        for o in _docs("examples/replicas/single-gpu-pending.yaml", now)
    }
    got = objects(docs)
    for name in ("gpu-east/serve/workload", "gpu-east/serve/claims-standalone"):
        assert got[name]["spec"]["forProvider"] == observed[name]["spec"]["forProvider"], name
