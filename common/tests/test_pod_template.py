"""The pod-template rule: what a tenant's member template may hold (design/tenancy.md)."""

from __future__ import annotations

import pytest
from modelplane_common import pod_template, workload_namespace

AT = "spec.template.spec.engines[0].members[0]"
T = f"{AT}.template"
VLLM = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}


def _template(metadata: dict | None = None, **spec: object) -> dict:
    return {"metadata": metadata or {}, "spec": {"containers": [VLLM], **spec}}


def _defects(template: dict) -> list[str]:
    return pod_template.read(template, AT)[2]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param(
            _template(resourceClaims=[{"name": "more", "resourceClaimTemplateName": "mine"}]),
            [
                f"{T}.spec.resourceClaims[0]: is not allowed: devices come only from the "
                "member's nodeSelector.devices, the claim the fleet scheduler charges "
                '(got "more")'
            ],
            id="an extra resourceClaims entry is refused, naming it",
        ),
        pytest.param(
            _template(resourceClaims=[{"name": "modelplane-devices", "resourceClaimName": "x"}]),
            [
                f"{T}.spec.resourceClaims[0]: is not allowed: devices come only from the "
                "member's nodeSelector.devices, the claim the fleet scheduler charges "
                '(got "modelplane-devices")'
            ],
            id="a resourceClaims entry under modelplane's own claim name is refused too",
        ),
        pytest.param(
            {"spec": {"containers": [{**VLLM, "resources": {"limits": {"nvidia.com/gpu": 8}}}]}},
            [
                f'{T}.spec.containers[0].resources.limits["nvidia.com/gpu"]: is not allowed: '
                "only cpu, memory, ephemeral-storage and hugepages-* may be set; devices come "
                'only from the member\'s nodeSelector.devices (got "nvidia.com/gpu")'
            ],
            id="an extended-resource limit in a container is refused",
        ),
        pytest.param(
            _template(
                initContainers=[{"name": "warm", "resources": {"requests": {"amd.com/gpu": "1"}}}]
            ),
            [
                f'{T}.spec.initContainers[0].resources.requests["amd.com/gpu"]: is not allowed: '
                "only cpu, memory, ephemeral-storage and hugepages-* may be set; devices come "
                'only from the member\'s nodeSelector.devices (got "amd.com/gpu")'
            ],
            id="an extended-resource request in an initContainer is refused",
        ),
        pytest.param(
            _template(resources={"limits": {"example.com/fpga": 1}}),
            [
                f'{T}.spec.resources.limits["example.com/fpga"]: is not allowed: '
                "only cpu, memory, ephemeral-storage and hugepages-* may be set; devices come "
                'only from the member\'s nodeSelector.devices (got "example.com/fpga")'
            ],
            id="an extended resource in pod-level resources is refused",
        ),
        pytest.param(
            {"spec": {"containers": [{**VLLM, "resources": {"claims": [{"name": "other"}]}}]}},
            [
                f"{T}.spec.containers[0].resources.claims[0].name: must be modelplane-devices: "
                'the one claim the fleet scheduler charges (got "other")'
            ],
            id="a container routing a claim other than modelplane-devices is refused",
        ),
        pytest.param(
            _template(ephemeralContainers=[{"name": "debug"}]),
            [
                f"{T}.spec.ephemeralContainers: is not allowed in a template "
                '(got [{"name": "debug"}])'
            ],
            id="ephemeralContainers are refused",
        ),
        pytest.param(
            _template(serviceAccountName="modelplane-agent"),
            [
                f"{T}.spec.serviceAccountName: must be default or unset: another ServiceAccount "
                'on the workload cluster is not the namespace\'s to use (got "modelplane-agent")'
            ],
            id="a ServiceAccount other than default is refused, naming it",
        ),
        pytest.param(
            _template(serviceAccount="gpu-operator"),
            [
                f"{T}.spec.serviceAccount: must be default or unset: another ServiceAccount "
                'on the workload cluster is not the namespace\'s to use (got "gpu-operator")'
            ],
            id="the deprecated serviceAccount alias is held to the same rule",
        ),
        pytest.param(
            _template(priority=2000001000),
            [
                f"{T}.spec.priority: is not allowed: priority comes from an approved "
                "priorityClassName (got 2000001000)"
            ],
            id="a priority set by value is refused",
        ),
        pytest.param(
            _template({"labels": {f"k{i}": "v" for i in range(65)}}),
            [f"{T}.metadata.labels: must hold at most 64 labels (got 65)"],
            id="more than 64 labels are refused",
        ),
        pytest.param(
            _template({"labels": {"big": "x" * 8190}}),
            [f"{T}.metadata.labels: must hold at most 8192 bytes of keys and values (got 8193)"],
            id="labels over 8 KiB are refused, with their size",
        ),
        pytest.param(
            # 10,000 labels of 60-character values: 600 KB a pod, what review N8 measured.
            # Keys k0..k9999 are 48,890 bytes, values 600,000.
            _template({"labels": {f"k{i}": "v" * 60 for i in range(10_000)}}),
            [
                f"{T}.metadata.labels: must hold at most 8192 bytes of keys and values "
                "(got 648890)",
                f"{T}.metadata.labels: must hold at most 64 labels (got 10000)",
            ],
            id="600 KB of labels, enough to exhaust the agent's memory, are refused",
        ),
        pytest.param(
            _template(resourceClaims=[{"name": f"c{i}"} for i in range(1000)]),
            [
                f"{T}.spec.resourceClaims[0]: is not allowed: devices come only from the "
                "member's nodeSelector.devices, the claim the fleet scheduler charges "
                '(got "c0")'
            ],
            id="a thousand extra claims give one defect, not a thousand",
        ),
        pytest.param(
            _template({"annotations": {"a": "x" * 65536}}),
            [
                f"{T}.metadata.annotations: must hold at most 65536 bytes of keys and values "
                "(got 65537)"
            ],
            id="annotations over 64 KiB are refused, with their size",
        ),
        pytest.param(
            _template({"annotations": {"replicas": 3}}),
            [f'{T}.metadata.annotations: must be an object of strings (got {{"replicas": 3}})'],
            id="an annotation that is not a string is refused",
        ),
        pytest.param(
            _template(initContainers=[{"name": "vllm"}]),
            [f'{T}.spec.containers[0].name: repeats another container\'s name (got "vllm")'],
            id="an initContainer and a container share one name space",
        ),
    ],
)
def test_a_template_taking_what_was_not_charged_is_refused(template, expected):
    assert _defects(template) == expected


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(
            {
                "spec": {
                    "containers": [
                        {
                            **VLLM,
                            "resources": {
                                "limits": {"cpu": "8", "memory": "64Gi", "hugepages-2Mi": "1Gi"},
                                "requests": {"ephemeral-storage": "10Gi"},
                                "claims": [{"name": "modelplane-devices"}],
                            },
                        }
                    ]
                }
            },
            id="cpu, memory, storage, hugepages and the modelplane claim are allowed",
        ),
        pytest.param(_template(serviceAccountName="default"), id="the default ServiceAccount"),
        pytest.param(
            _template(priorityClassName="anything"), id="priorityClassName is the cluster's"
        ),
        pytest.param(
            _template({"labels": {f"k{i}": "v" * 60 for i in range(64)}}),
            id="64 labels within 8 KiB",
        ),
        pytest.param(_template(hostUsers=False), id="hostUsers false only narrows the pod"),
        pytest.param(_template(hostNetwork=True), id="host namespaces are Pod Security's to judge"),
    ],
)
def test_a_template_within_the_rules_is_accepted(template):
    assert _defects(template) == []


@pytest.mark.parametrize(
    ("name", "approved", "expected"),
    [
        pytest.param(None, (), [], id="no class is the cluster's default, always allowed"),
        pytest.param("inference-high", ("inference-high",), [], id="an approved class"),
        pytest.param(
            "system-node-critical",
            (),
            [
                f"{T}.spec.priorityClassName: is not approved on this cluster "
                '(spec.tenancy.priorityClassNames: none) (got "system-node-critical")'
            ],
            id="any class on a cluster that approves none is refused",
        ),
        pytest.param(
            "system-node-critical",
            ("inference-high", "batch-low"),
            [
                f"{T}.spec.priorityClassName: is not approved on this cluster "
                "(spec.tenancy.priorityClassNames: inference-high, batch-low) "
                '(got "system-node-critical")'
            ],
            id="a class off the list is refused, naming the list",
        ),
    ],
)
def test_priority_class_only_from_the_clusters_list(name, approved, expected):
    spec = {"containers": [VLLM]} | ({"priorityClassName": name} if name else {})
    assert pod_template.priority_class_defects(spec, T, approved) == expected


@pytest.mark.parametrize(
    ("namespace", "reserved_here", "refused"),
    [
        pytest.param("default", (), "every", id="default is reserved everywhere"),
        pytest.param("kube-system", (), "every", id="kube-system is reserved everywhere"),
        pytest.param("kube-anything", (), "every", id="every kube-* name is reserved"),
        pytest.param("modelplane-system", (), "every", id="the agent's namespace is reserved"),
        pytest.param("gpu-operator", ("gpu-operator",), "this", id="a cluster's own list"),
        pytest.param(
            "gpu-operator", (), None, id="not reserved on a cluster that does not list it"
        ),
        pytest.param("team-a", ("gpu-operator",), None, id="a tenant namespace is used as it is"),
        pytest.param("my-kube-system", (), None, id="only the kube- prefix is reserved"),
    ],
)
def test_reserved_workload_namespaces(namespace, reserved_here, refused):
    got = workload_namespace.reserved_problem(namespace, reserved_here)
    if refused is None:
        assert got is None
    else:
        assert got is not None
        assert got.startswith(f"metadata.namespace: is reserved on {refused} ")
        assert got.endswith(f'(got "{namespace}")')
