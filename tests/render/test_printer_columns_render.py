"""What `kubectl get` prints: every printer column and scale path of the three XRDs
points at a field the functions really write, on the rendered examples.

The API server evaluates these paths with Kubernetes' JSONPath and prints the first
match; the e2e (tests/e2e/test_story.py) reads the real table. Here a small evaluator
covers exactly the forms the XRDs use (`.a.b`, `[0]`, `[?(@.k=='v')]`) and refuses any
other, so a column written in another form fails this test instead of passing unread.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import yaml
from modelplane_devtools import render

XRDS = {
    "InferenceCluster": render.ROOT / "apis" / "inferencecluster" / "definition.yaml",
    "ModelReplica": render.ROOT / "apis" / "modelreplica" / "definition.yaml",
    "ModelDeployment": render.ROOT / "apis" / "modeldeployment" / "definition.yaml",
}
STEP = re.compile(r"\.([A-Za-z0-9_]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_]+)=='([^']*)'\)\]")
MISSING = object()


def _step(value: object, field: str | None, index: str | None, key: str, wanted: str) -> object:
    if field is not None:
        return value.get(field, MISSING) if isinstance(value, dict) else MISSING
    if index is not None:
        fits = isinstance(value, list) and len(value) > int(index)
        return value[int(index)] if fits else MISSING  # type: ignore[index]
    items = value if isinstance(value, list) else []
    return next((v for v in items if isinstance(v, dict) and v.get(key) == wanted), MISSING)


def resolve(obj: object, path: str) -> object:
    """The first value `path` selects in `obj`, or MISSING."""
    at, value = 0, obj
    while at < len(path) and value is not MISSING:
        step = STEP.match(path, at)
        assert step, f"unsupported JSONPath {path!r} at {path[at:]!r}"
        value, at = _step(value, *step.groups()), step.end()
    return value


@pytest.mark.parametrize(
    ("path", "want"),
    [
        pytest.param(".status.ready", "1/2", id="a-field-path-reads-the-field"),
        pytest.param(".spec.e[1].n", "b", id="an-index-reads-that-item"),
        pytest.param(
            ".status.c[?(@.type=='B')].reason", "Two", id="a-filter-reads-the-first-match"
        ),
        pytest.param(
            ".status.c[?(@.type=='C')].reason", MISSING, id="a-filter-without-match-is-missing"
        ),
        pytest.param(".spec.e[5].n", MISSING, id="an-index-past-the-end-is-missing"),
        pytest.param(".status.absent.deeper", MISSING, id="a-missing-field-is-missing"),
    ],
)
def test_the_evaluator_reads_the_forms_the_columns_use(path, want):
    obj = {
        "spec": {"e": [{"n": "a"}, {"n": "b"}]},
        "status": {
            "ready": "1/2",
            "c": [{"type": "A", "reason": "One"}, {"type": "B", "reason": "Two"}],
        },
    }
    assert resolve(obj, path) == want


def test_the_evaluator_refuses_a_form_it_does_not_know():
    with pytest.raises(AssertionError, match="unsupported JSONPath"):
        resolve({"status": {"conditions": []}}, ".status.conditions[*].reason")


def _version(kind: str) -> dict:
    return yaml.safe_load(XRDS[kind].read_text())["spec"]["versions"][0]


def _paths(kind: str) -> Iterator[tuple[str, str, str]]:
    version = _version(kind)
    for column in version.get("additionalPrinterColumns", []):
        yield column["name"], column["jsonPath"], column["type"]
    scale = version.get("subresources", {}).get("scale", {})
    for name in ("specReplicasPath", "statusReplicasPath"):
        if name in scale:
            yield name, scale[name], "integer"


@pytest.fixture(scope="module")
def rendered(functions) -> dict[str, list[dict]]:
    """Every example case's rendered composite, by kind."""
    by_kind: dict[str, list[dict]] = {kind: [] for kind in XRDS}
    for case in render.example_cases():
        xr = render.render_case(functions, case)[0]
        by_kind[xr["kind"]].append(xr)
    return by_kind


PYTHON_TYPE = {"string": str, "integer": int}
COLUMNS = [
    pytest.param(kind, name, path, kind_of, id=f"{kind}-{name}")
    for kind in XRDS
    for name, path, kind_of in _paths(kind)
]


@pytest.mark.parametrize(("kind", "name", "path", "kind_of"), COLUMNS)
def test_every_column_prints_a_value_of_its_type_on_some_rendered_example(
    rendered, kind, name, path, kind_of
):
    values = [resolve(xr, path) for xr in rendered[kind]]
    printed = [v for v in values if v is not MISSING]
    assert printed, f"{kind} column {name} ({path}) is empty on every rendered example"
    assert all(isinstance(v, PYTHON_TYPE[kind_of]) for v in printed), (name, printed)


def test_the_deployment_columns_say_its_counts_as_scheduled_and_ready_of_desired(rendered):
    for xr in rendered["ModelDeployment"]:
        counts = xr["status"]["replicas"]
        assert xr["status"]["scheduled"] == f"{counts['scheduled']}/{counts['desired']}"
        assert xr["status"]["ready"] == f"{counts['ready']}/{counts['desired']}"


def test_the_cluster_column_says_its_observed_pools_of_declared(rendered):
    for xr in rendered["InferenceCluster"]:
        status = xr["status"]
        assert status["observedPools"] == f"{status['observedPoolCount']}/{len(status['gpuPools'])}"


def test_the_examples_show_every_kind_both_stuck_and_moving(rendered):
    """A reason column earns its place when it differs: the examples must show more
    than one reason in each, or the tests above prove one value only."""
    for kind, column in (
        ("ModelDeployment", "REASON"),
        ("ModelReplica", "SCHEDULED"),
        ("InferenceCluster", "REASON"),
    ):
        path = next(p for n, p, _ in _paths(kind) if n == column)
        reasons = {resolve(xr, path) for xr in rendered[kind]} - {MISSING}
        assert len(reasons) > 1, (kind, column, reasons)
