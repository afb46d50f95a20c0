"""deploy/monitoring names only metrics that exist, and selects what the runtime config labels.

Every metric name in every alert expression (prometheusrule.yaml) and every
dashboard query (grafana-dashboard.json, its panels and its variables) must
be one that is emitted: by the functions' registry
(modelplane_common.metrics), by the agent's (modelplane_agent.metrics), or by
kube-state-metrics under kube-state-metrics.yaml. That configuration's paths
must exist in the XRDs it reads (apis/*/definition.yaml), and the PodMonitor
must select the pods and port that deploy/control-plane/functions.yaml gives
the functions, and the address it has them serve on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from modelplane_agent import metrics as agent_metrics
from modelplane_common import metrics as function_metrics
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
}


def emitted(registry: CollectorRegistry) -> set[str]:
    """Every sample name a registry can expose, its labelled children unborn included."""
    names: set[str] = set()
    for family in registry.collect():
        suffixes = _SUFFIXES.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
        names |= {sample.name for sample in family.samples}
    return names


def state_metrics() -> set[str]:
    """The names kube-state-metrics emits under kube-state-metrics.yaml."""
    config = yaml.safe_load((MONITORING / "kube-state-metrics.yaml").read_text())
    return {
        f"{resource['metricNamePrefix']}_{metric['name']}"
        for resource in config["spec"]["resources"]
        for metric in resource["metrics"]
    }


KNOWN = emitted(function_metrics.REGISTRY) | emitted(agent_metrics.REGISTRY) | state_metrics()

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])[A-Za-z_:][\w:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*,")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside label matchers,
    ranges and grouping clauses that are neither functions nor keywords."""
    bare = _GROUPING.sub("", _RANGE.sub("", _MATCHERS.sub("", _STRING.sub('""', expr))))
    names = set()
    for match in _IDENTIFIER.finditer(bare):
        rest = bare[match.end() :].lstrip()
        if not rest.startswith("(") and match.group() not in _KEYWORDS:
            names.add(match.group())
    return names


EXTRACTION_CASES = {
    "a counter in a rate, with matchers and a range": (
        'sum by (cluster) (rate(modelplane_placements_total{change="Placed"}[5m]))',
        {"modelplane_placements_total"},
    ),
    "a ratio of two series and a number in exponent form": (
        "sum(rate(a_total[5m])) / sum(rate(b_total[5m])) > 32e6",
        {"a_total", "b_total"},
    ),
    "a histogram quantile by le, and a Grafana interval variable": (
        "histogram_quantile(0.99, sum by (function, le) (rate(x_bucket[$__rate_interval])))",
        {"x_bucket"},
    ),
    "time() minus a gauge": ("time() - max by (pool) (g_seconds) > 300", {"g_seconds"}),
    "a label value that looks like a name is no metric": (
        'count(s{type="Ready", status="True"} == 0)',
        {"s"},
    ),
}


@pytest.mark.parametrize(
    ("expr", "names"), EXTRACTION_CASES.values(), ids=list(EXTRACTION_CASES.keys())
)
def test_metric_names_are_read_from_promql(expr, names):
    assert metric_names(expr) == names


def _rule_expressions() -> Iterator[tuple[str, str]]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            yield f"alert {r['alert']}", r["expr"]


def _dashboard_expressions() -> Iterator[tuple[str, str]]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]


def _variable_metrics() -> Iterator[tuple[str, str]]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            for metric in _LABEL_VALUES.findall(variable["definition"]):
                yield f"variable {variable['name']}", metric


QUERIES = [*_rule_expressions(), *_dashboard_expressions()]


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_query_names_only_emitted_metrics(where, expr):
    names = metric_names(expr)
    assert names, f"{where}: no metric found in {expr!r}"
    assert names <= KNOWN, f"{where}: {sorted(names - KNOWN)} is emitted by nothing"


@pytest.mark.parametrize(("where", "metric"), list(_variable_metrics()))
def test_every_dashboard_variable_reads_an_emitted_metric(where, metric):
    assert metric in KNOWN, where


# What a platform team alerts on (docs/operating.md, "Monitoring"), by the metric it reads.
ALERTED = {
    "pools read stale": "modelplane_pool_verdicts_total",
    "Overcommitted rate": "modelplane_admission_verdicts_total",
    "InsufficientCapacity rate": "modelplane_function_conditions_total",
    "agent write errors": "modelplane_agent_status_writes_total",
    "calls past their deadline": "modelplane_function_requests_total",
}


@pytest.mark.parametrize("metric", ALERTED.values(), ids=list(ALERTED.keys()))
def test_each_decision_a_platform_alerts_on_has_an_alert(metric):
    assert any(metric in metric_names(expr) for _, expr in _rule_expressions())


def _schema(kind_folder: str) -> tuple[dict, dict]:
    xrd = yaml.safe_load((ROOT / "apis" / kind_folder / "definition.yaml").read_text())
    version = next(v for v in xrd["spec"]["versions"] if v.get("served", True))
    return xrd, version


# What Crossplane adds to every composite's CRD beside the XRD's own schema: its
# metadata, and the conditions (type, status, reason, message) of status.conditions.
CROSSPLANE_ADDS = (["metadata"], ["status", "conditions"])


def _has_path(schema: dict, path: list[str]) -> bool:
    if any(path[: len(added)] == added for added in CROSSPLANE_ADDS):
        return True
    node = schema
    for step in path:
        props = node.get("properties", {})
        if step not in props:
            return False
        node = props[step]
        node = node.get("items", node) if node.get("type") == "array" else node
    return True


def _state_paths() -> Iterator[tuple[str, list[str]]]:
    config = yaml.safe_load((MONITORING / "kube-state-metrics.yaml").read_text())
    for resource in config["spec"]["resources"]:
        kind = resource["groupVersionKind"]["kind"]
        for path in resource.get("labelsFromPath", {}).values():
            yield kind, path
        for metric in resource["metrics"]:
            each = metric["each"]
            spec = each[{"StateSet": "stateSet", "Gauge": "gauge"}[each["type"]]]
            yield kind, spec["path"]
            for path in spec.get("labelsFromPath", {}).values():
                yield kind, [*spec["path"], *path]


STATE_PATHS = list(_state_paths())


@pytest.mark.parametrize(
    ("kind", "path"), STATE_PATHS, ids=[f"{k} {'.'.join(p)}" for k, p in STATE_PATHS]
)
def test_every_state_metric_path_is_in_the_xrd(kind, path):
    xrd, version = _schema(kind.lower())
    assert xrd["spec"]["names"]["kind"] == kind
    assert _has_path(version["schema"]["openAPIV3Schema"], path), f"{kind}: {path}"


@pytest.mark.parametrize("kind", ["InferenceCluster", "ModelReplica", "ModelDeployment"])
def test_kube_state_metrics_reads_each_composite_by_its_group_and_served_version(kind):
    config = yaml.safe_load((MONITORING / "kube-state-metrics.yaml").read_text())
    gvk = next(
        r["groupVersionKind"]
        for r in config["spec"]["resources"]
        if r["groupVersionKind"]["kind"] == kind
    )
    xrd, version = _schema(kind.lower())
    assert (gvk["group"], gvk["version"]) == (xrd["spec"]["group"], version["name"])


def metrics_port(address: str) -> int:
    return function_metrics.parse_address(address)[1]


def test_the_pod_monitor_selects_the_function_pods_on_their_metrics_port():
    docs = list(yaml.safe_load_all((ROOT / "deploy/control-plane/functions.yaml").read_text()))
    runtime = next(d for d in docs if d["kind"] == "DeploymentRuntimeConfig")
    template = runtime["spec"]["deploymentTemplate"]["spec"]["template"]
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    monitor = yaml.safe_load((MONITORING / "podmonitor.yaml").read_text())
    selected = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]

    env = {e["name"]: e["value"] for e in container["env"]}

    assert container["name"] == "package-runtime"  # the container Crossplane's runtime fills in
    assert metrics_port(env["METRICS_ADDRESS"]) == ports["metrics"]
    assert selected.items() <= template["metadata"]["labels"].items()
    assert ports[endpoint["port"]] == function_metrics.METRICS_PORT
    assert endpoint["path"] == function_metrics.PATH


def _families(registry: CollectorRegistry) -> set[str]:
    return {family.name for family in registry.collect()}


# The guide may name a histogram or counter by its family name.
NAMEABLE = KNOWN | _families(function_metrics.REGISTRY) | _families(agent_metrics.REGISTRY)
GUIDE_NAME = re.compile(r"`((?:modelplane|function|circuit_breaker|process)_[a-z_]*[a-z])[`{]")
# Crossplane core's own metrics (crossplane v2.3.4: internal/xfn, internal/circuit).
CROSSPLANE_CORE = {
    "function_run_function_request_total",
    "function_run_function_response_total",
    "function_run_function_seconds",
    "circuit_breaker_opens_total",
    "circuit_breaker_closes_total",
    "circuit_breaker_events_total",
}


def test_every_metric_the_operating_guide_names_is_emitted():
    guide = (ROOT / "docs" / "operating.md").read_text()
    named = set(GUIDE_NAME.findall(guide)) - {"function_name"}  # a label of Crossplane's
    assert {"modelplane_pool_verdicts_total", "modelplane_agent_current"} <= named
    assert named - CROSSPLANE_CORE <= NAMEABLE, sorted(named - CROSSPLANE_CORE - NAMEABLE)
