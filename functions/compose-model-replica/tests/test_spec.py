"""parse_spec: every defect the XRD forbids becomes one line naming the field and the value,
on the engine it belongs to (the replica's other engines go on), and nothing raises."""

from __future__ import annotations

import pytest
from compose_model_replica.spec import parse_spec

CONTAINERS = {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.9.0"}]}
GPU = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1.0}
DIGEST = "sha256:" + "0" * 64


def member(**fields: object) -> dict:
    return {
        "role": "Standalone",
        "nodePoolName": "h100",
        "deviceRequests": [GPU],
        "template": {"spec": CONTAINERS},
        **fields,
    }


def engine(*members: dict, **fields: object) -> dict:
    return {"name": "serve", "members": list(members) or [member()], **fields}


def spec(*engines: object, **fields: object) -> dict:
    return {"clusterName": "east", "engines": list(engines), **fields}


def leader_and_worker(**worker: object) -> dict:
    return engine(
        member(role="Leader", deviceRequests=None), member(role="Worker", **worker), name="serve"
    )


ENGINE_DEFECTS = [
    pytest.param(
        engine(copies=0),
        "copies: Input should be greater than or equal to 1 (got 0)",
        id="zero copies",
    ),
    pytest.param(
        engine(copies="2"),
        'copies: Input should be a valid integer (got "2")',
        id="copies as a string is not a count",
    ),
    pytest.param(
        engine(copies=2.5),
        "copies: Input should be a valid integer (got 2.5)",
        id="fractional copies",
    ),
    pytest.param(
        engine(member(deviceRequests=[{**GPU, "count": True}])),
        "members[0].deviceRequests[0].count: Input should be a valid integer (got true)",
        id="a JSON true is not a count",
    ),
    pytest.param(
        engine(member(deviceRequests=[{"name": "gpu", "count": 1}])),
        "members[0].deviceRequests[0].deviceClassName: is required (got no value)",
        id="a device request without a device class",
    ),
    pytest.param(
        engine(member(deviceRequests=[{**GPU, "selectors": [{"cel": "device.driver == 'x'"}]}])),
        "members[0].deviceRequests[0].selectors[0].cel: Input should be an object "
        "(got \"device.driver == 'x'\")",
        id="a selector's cel given as a string, not DRA's {expression}",
    ),
    pytest.param(
        engine(member(deviceRequests=[{**GPU, "selectors": [{"cel": {"expression": "  "}}]}])),
        "members[0] (Standalone).deviceRequests[0].selectors[0].cel.expression: "
        'is blank (got "  ")',
        id="a blank selector expression",
    ),
    pytest.param(
        engine(member(deviceRequests=[GPU, GPU])),
        'members[0] (Standalone).deviceRequests[1].name: is repeated (got "gpu")',
        id="a request name twice in a member",
    ),
    pytest.param(
        engine(member(deviceRequests=[{**GPU, "count": 16}, {**GPU, "name": "nic", "count": 17}])),
        "members[0] (Standalone).deviceRequests: the counts sum to at most 32: a pod's one "
        "ResourceClaim allocates at most 32 devices, and kube-scheduler refuses more "
        "(got [16, 17])",
        id="33 devices across two requests",
    ),
    pytest.param(
        engine(member(deviceRequests=[{**GPU, "count": 33}])),
        "members[0].deviceRequests[0].count: Input should be less than or equal to 32 (got 33)",
        id="one request of 33 devices",
    ),
    pytest.param(
        engine(member(role="Solo")),
        "members[0].role: Input should be 'Standalone', 'Leader' or 'Worker' (got \"Solo\")",
        id="an unknown role is never guessed",
    ),
    pytest.param(
        engine(member(), member()),
        "members: an engine has one Standalone member, or one Leader and one Worker member "
        '(got ["Standalone", "Standalone"])',
        id="two Standalone members",
    ),
    pytest.param(
        leader_and_worker(),
        "members[1] (Worker).worker: is required on a Worker member (got null)",
        id="a Worker without worker.nodes",
    ),
    pytest.param(
        leader_and_worker(worker={"nodes": 0}),
        "members[1].worker.nodes: Input should be greater than or equal to 1 (got 0)",
        id="zero worker nodes",
    ),
    pytest.param(
        engine(member(worker={"nodes": 2})),
        'members[0] (Standalone).worker: is set only on a Worker member (got {"nodes": 2})',
        id="worker set on a Standalone member",
    ),
    pytest.param(
        engine(member(nodePoolName="H100")),
        "members[0].nodePoolName: String should match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' "
        '(got "H100")',
        id="a pool name that is not a DNS label",
    ),
    pytest.param(
        engine(member(template={"spec": {}})),
        "members[0] (Standalone).template has no containers",
        id="a template without containers",
    ),
    pytest.param(
        engine(member(template={"spec": {**CONTAINERS, "tolerations": {}}})),
        "members[0] (Standalone).template.spec.tolerations: must be a list (got {})",
        id="a template field the workloads merge into has the wrong shape",
    ),
    pytest.param(
        engine(member(templateDigest=DIGEST)),
        f'members[0] (Standalone).templateDigest: is set beside template (got "{DIGEST}")',
        id="a template both inline and by digest",
    ),
    pytest.param(
        engine(member(template=None, templateDigest="sha256:ABC")),
        "members[0].templateDigest: String should match pattern '^sha256:[0-9a-f]{64}$' "
        '(got "sha256:ABC")',
        id="a digest that is not sha256 and 64 lowercase hex",
    ),
    pytest.param(
        engine(member(template=None)),
        "members[0] (Standalone).template must be a pod template with containers",
        id="a member with neither a template nor a digest",
    ),
]


def test_a_member_named_by_digest_holds_the_digest_and_no_template_until_resolved():
    parsed = parse_spec(spec(engine(member(template=None, templateDigest=DIGEST))))
    ((only,),) = [e.members for e in parsed.engines]
    assert (only.template_digest, only.position, only.pod_spec) == (DIGEST, 0, {})
    assert parsed.templates_by_digest and parsed.expected_pods == 1


@pytest.mark.parametrize(("bad", "defect"), ENGINE_DEFECTS)
def test_a_defective_engine_is_invalid_by_name_and_the_others_go_on(bad, defect):
    parsed = parse_spec(spec(bad, engine(name="other")))
    assert [e.name for e in parsed.engines] == ["other"]
    assert [(i.name, i.defects) for i in parsed.invalid] == [("serve", (defect,))]
    assert parsed.defects == ()
    assert parsed.expected_pods is None  # an invalid engine hides the replica's size


@pytest.mark.parametrize(
    ("raw", "defects", "invalid"),
    [
        pytest.param(
            {"engines": [engine()]},
            ("spec.clusterName: is required (got no value)",),
            (),
            id="no cluster name",
        ),
        pytest.param(
            spec(engine(), tolerations="all"),
            ('spec.tolerations: Input should be a valid array (got "all")',),
            (),
            id="tolerations not a list",
        ),
        pytest.param(
            spec(engine(), tolerations=[{"operator": "exists"}]),
            ("spec.tolerations[0].operator: Input should be 'Exists' or 'Equal' (got \"exists\")",),
            (),
            id="a toleration operator outside its enum",
        ),
        pytest.param(
            {"clusterName": "east"},
            ("spec.engines: is required (got no value)",),
            (),
            id="no engines",
        ),
        pytest.param(
            spec(),
            ("spec.engines: List should have at least 1 item after validation, not 0 (got [])",),
            (),
            id="an empty engine list",
        ),
        pytest.param(
            spec(engine(name="Serve")),
            (),
            (
                "spec.engines[0].name: String should match pattern "
                "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' "
                '(got "Serve")',
            ),
            id="an engine whose name is not a DNS label is known by its position",
        ),
        pytest.param(
            spec("serve"),
            (),
            ('spec.engines[0]: Input should be an object (got "serve")',),
            id="an engine that is not an object",
        ),
        pytest.param(
            spec(engine(), engine()),
            (),
            ('spec.engines[1].name: is repeated (got "serve")',),
            id="an engine name twice",
        ),
    ],
)
def test_a_defect_outside_a_named_engine_is_the_replicas(raw, defects, invalid):
    parsed = parse_spec(raw)
    assert parsed.defects == defects
    assert [(i.name, i.message) for i in parsed.invalid] == [("", m) for m in invalid]


@pytest.mark.parametrize(
    ("raw", "copies", "pods"),
    [
        pytest.param(engine(), 1, 1, id="copies absent is one"),
        pytest.param(
            engine(copies=None), 1, 1, id="copies null is absent, as the API server prunes it"
        ),
        pytest.param(engine(copies=3.0), 3, 3, id="the wire's 3.0 is 3"),
        pytest.param(
            leader_and_worker(worker={"nodes": 2.0}, template={"spec": CONTAINERS}),
            1,
            3,
            id="a gang copy is its leader and worker.nodes workers",
        ),
    ],
)
def test_a_valid_engine_reads_its_counts_as_whole_numbers(raw, copies, pods):
    parsed = parse_spec(spec(raw))
    assert (parsed.defects, parsed.invalid) == ((), ())
    assert [(e.copies, e.pods) for e in parsed.engines] == [(copies, pods)]
    assert parsed.expected_pods == pods


def test_a_member_claiming_32_devices_in_total_is_valid():
    requests = [
        {**GPU, "count": 16},
        {**GPU, "name": "nic", "count": 8},
        {**GPU, "name": "x", "count": 8},
    ]
    parsed = parse_spec(spec(engine(member(deviceRequests=requests))))
    ((only,),) = [e.members for e in parsed.engines]
    assert ([r.count for r in only.requests], parsed.invalid) == ([16, 8, 8], ())
