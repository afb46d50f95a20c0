"""The install manifests agree with the design and with what the agent serves."""

from __future__ import annotations

import copy
import json
import logging
import re
import shutil
import subprocess
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml
from modelplane_agent import main
from modelplane_agent.server import serve
from modelplane_common.timeutil import parse_duration
from modelplane_devtools import render

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "agent"


def load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_the_cluster_role_is_the_one_in_the_design():
    design = (ROOT / "design" / "observation.md").read_text()
    block = re.search(r"```yaml\n(apiVersion: rbac.*?)```", design, re.S)
    assert block is not None
    documented = yaml.safe_load(block.group(1))
    deployed = load("clusterrole.yaml")
    assert deployed["rules"] == documented["rules"]
    assert deployed["metadata"]["name"] == documented["metadata"]["name"]


def test_the_binding_grants_the_role_to_the_deployment_service_account():
    binding, deployment = load("clusterrolebinding.yaml"), load("deployment.yaml")
    account = load("serviceaccount.yaml")
    pod = deployment["spec"]["template"]["spec"]
    assert binding["roleRef"]["name"] == load("clusterrole.yaml")["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == load("namespace.yaml")["metadata"]["name"]


def test_the_probes_ask_paths_the_agent_answers():
    container = load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    paths = {
        container[probe]["httpGet"]["path"]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe")
    }
    server = serve("127.0.0.1", 0, lambda: True, lambda: False)
    try:
        port = server.server_address[1]
        answers = {}
        for path in [*sorted(paths), "/metrics"]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as response:
                    answers[path] = response.status
            except urllib.error.HTTPError as error:
                answers[path] = error.code
    finally:
        server.shutdown()
    assert answers == {"/healthz": 200, "/readyz": 503, "/metrics": 200}


# ---------------------------------------------------------------- the kustomization

KINDS = [
    ("ClusterRole", "modelplane-agent"),
    ("ClusterRoleBinding", "modelplane-agent"),
    ("CustomResourceDefinition", "poolobservations.agent.modelplane.ai"),
    ("CustomResourceDefinition", "replicaobservations.agent.modelplane.ai"),
    ("Deployment", "modelplane-agent"),
    ("Namespace", "modelplane-system"),
    ("ServiceAccount", "modelplane-agent"),
]


def by_kind_and_name(docs: list[dict]) -> list[dict]:
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


def names(docs: list[dict]) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in by_kind_and_name(docs)]


def manifests() -> list[dict]:
    """Every object the files of deploy/agent hold, as written."""
    paths = sorted(DEPLOY.glob("*.yaml")) + sorted((DEPLOY / "crds").glob("*.yaml"))
    return [
        d for p in paths if p.name != "kustomization.yaml" for d in render.load_all(p.read_text())
    ]


def container_of(docs: list[dict]) -> dict:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_kustomization_applies_every_manifest_of_deploy_agent_as_written():
    rendered = render.kustomize(DEPLOY)
    assert names(rendered) == KINDS
    assert by_kind_and_name(rendered) == by_kind_and_name(manifests())


def test_an_image_entry_points_the_deployment_at_another_registry(tmp_path):
    # What `kustomize edit set image <the entry's name>=<ref>` writes, in an overlay.
    (entry,) = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["images"]
    shutil.copytree(DEPLOY, tmp_path / "agent")
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["../agent"],
                "images": [
                    {
                        "name": entry["name"],
                        "newName": "registry.example.com/modelplane-agent",
                        "newTag": "v9.9.9",
                    }
                ],
            }
        )
    )
    assert container_of(manifests())["image"].rpartition(":")[0] == entry["name"]
    rendered = container_of(render.kustomize(tmp_path / "overlay"))
    assert rendered["image"] == "registry.example.com/modelplane-agent:v9.9.9"


def test_the_deployment_logs_json_like_the_functions():
    assert "--log-format=json" in container_of(manifests())["args"]


def test_the_deployment_leaves_max_age_to_the_pool_observations():
    args = container_of(manifests())["args"]
    assert not [a for a in args if a.startswith("--max-age")], args


# ---------------------------------------------------------------- the Helm chart

CHART = ROOT / "deploy" / "helm" / "modelplane-agent"


def helm(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # Helm's cache, config and data in the test's folder: nothing read from or written
    # to the machine's home.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        **{f"HELM_{d}_HOME": str(tmp_path / d.lower()) for d in ("CACHE", "CONFIG", "DATA")},
    }
    return subprocess.run(
        [str(render.helm()), *args], capture_output=True, text=True, check=False, env=env
    )


def helm_template(tmp_path: Path, *settings: str) -> list[dict]:
    done = helm(
        tmp_path,
        "template",
        "modelplane-agent",
        str(CHART),
        "--namespace=modelplane-system",
        "--include-crds",
        *(f"--set={s}" for s in settings),
    )
    assert done.returncode == 0, done.stderr
    return render.load_all(done.stdout)


def test_a_plain_helm_template_renders_the_chart(tmp_path):
    # No --kube-version: Helm then assumes the Kubernetes version stamped into its
    # build (v1.20 unless its Makefile's ldflags set another), as GitOps renderers do.
    done = helm(tmp_path, "template", str(CHART))
    assert done.returncode == 0, done.stderr
    kinds = sorted(d["kind"] for d in render.load_all(done.stdout))
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "ServiceAccount"]


def test_helm_lint_finds_nothing_wrong_with_the_chart(tmp_path):
    for values in ([], ["--set=podMonitor.enabled=true", "--set=maxAge=2m"]):
        done = helm(tmp_path, "lint", "--strict", str(CHART), *values)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_chart_renders_what_the_kustomization_applies_for_default_values(tmp_path):
    # One normalisation: the kustomization's Namespace is left out, since Helm makes
    # the release namespace itself (`--create-namespace`); a chart that templated it
    # too could not be installed into it. Nothing else differs, labels included
    # (the chart adds no per-release labels; templates/_helpers.tpl says why).
    applied = [d for d in render.kustomize(DEPLOY) if d["kind"] != "Namespace"]
    assert by_kind_and_name(helm_template(tmp_path)) == by_kind_and_name(applied)


def test_the_charts_crds_are_deploy_agents_and_its_app_version_the_workspaces():
    assert (CHART / "crds").resolve() == (DEPLOY / "crds").resolve()
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    workspace = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (chart["version"], chart["appVersion"]) == (workspace, workspace)


VALUES = [
    pytest.param(
        ["image.repository=registry.example.com/modelplane-agent", "image.tag=v9.9.9"],
        {"image": "registry.example.com/modelplane-agent:v9.9.9"},
        {},
        id="image repository and tag name the container's image",
    ),
    pytest.param(
        ["image.pullPolicy=Always"], {"imagePullPolicy": "Always"}, {}, id="image pull policy"
    ),
    pytest.param(
        ["logLevel=DEBUG", "minInterval=5s", "logFormat=text"],
        {
            "args": [
                "--listen=0.0.0.0:8080",
                "--min-interval=5s",
                "--log-level=DEBUG",
                "--log-format=text",
            ]
        },
        {},
        id="log level, log format and min interval are the agent's arguments",
    ),
    pytest.param(
        ["maxAge=2m", "extraArgs[0]=--kubeconfig=/etc/kube/config"],
        {
            "args": [
                "--listen=0.0.0.0:8080",
                "--min-interval=2s",
                "--log-level=INFO",
                "--log-format=json",
                "--max-age=2m",
                "--kubeconfig=/etc/kube/config",
            ]
        },
        {},
        id="maxAge overrides the pools' only when set, extra arguments follow",
    ),
    pytest.param(
        ["resources.requests.cpu=1", "resources.limits.memory=4Gi"],
        {"resources": {"requests": {"cpu": 1, "memory": "256Mi"}, "limits": {"memory": "4Gi"}}},
        {},
        id="resources merge over the defaults",
    ),
    pytest.param(
        [
            "tolerations[0].key=dedicated",
            "tolerations[0].operator=Exists",
            "nodeSelector.pool=system",
            "priorityClassName=system-cluster-critical",
        ],
        {},
        {
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "nodeSelector": {"pool": "system"},
            "priorityClassName": "system-cluster-critical",
        },
        id="tolerations, node selector and priority class reach the pod",
    ),
]


@pytest.mark.parametrize(("settings", "container", "pod"), VALUES)
def test_values_change_only_what_they_name(tmp_path, settings, container, pod):
    default = helm_template(tmp_path)
    changed = helm_template(tmp_path, *settings)
    (before,) = [d for d in default if d["kind"] == "Deployment"]
    (after,) = [d for d in changed if d["kind"] == "Deployment"]
    expected = copy.deepcopy(before)
    expected["spec"]["template"]["spec"].update(pod)
    expected["spec"]["template"]["spec"]["containers"][0].update(container)
    assert after == expected
    assert [d for d in changed if d["kind"] != "Deployment"] == [
        d for d in default if d["kind"] != "Deployment"
    ]


def test_a_pod_monitor_scrapes_the_agents_metrics_only_when_enabled(tmp_path):
    assert "PodMonitor" not in {d["kind"] for d in helm_template(tmp_path)}
    docs = helm_template(tmp_path, "podMonitor.enabled=true", "podMonitor.labels.release=prom")
    (monitor,) = [d for d in docs if d["kind"] == "PodMonitor"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    assert monitor["metadata"]["namespace"] == "modelplane-system"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (port,) = pod["spec"]["containers"][0]["ports"]
    assert (endpoint["port"], endpoint["path"]) == (port["name"], "/metrics")


# ---------------------------------------------------------------- the values schema

SCHEMA = json.loads((CHART / "values.schema.json").read_text())

SCHEMA_CASES = [
    pytest.param(["logLevel=DEBUG"], None, id="a log level the agent knows renders"),
    pytest.param(["logLevel=LOUD"], "/logLevel", id="an unknown log level is refused"),
    pytest.param(["minInterval=1m30s"], None, id="a compound duration renders"),
    pytest.param(
        ["minInterval=abc"], "/minInterval", id="a min interval not a duration is refused"
    ),
    pytest.param(["minInterval=2"], "/minInterval", id="a duration without its unit is refused"),
    pytest.param(["maxAge=2m"], None, id="a max age renders"),
    pytest.param(["maxAge=soon"], "/maxAge", id="a max age not a duration is refused"),
    pytest.param(["image.pullPolicy=Never"], None, id="a Kubernetes pull policy renders"),
    pytest.param(
        ["image.pullPolicy=Sometimes"], "/image/pullPolicy", id="an unknown pull policy is refused"
    ),
    pytest.param(
        ["image.repository=registry.example.com:5000/team/modelplane-agent"],
        None,
        id="a repository on a registry with a port renders",
    ),
    pytest.param(
        ["image.repository=registry.example.com/agent:v1"],
        "/image/repository",
        id="a repository carrying its tag is refused (the tag is image.tag)",
    ),
    pytest.param(["image.tag=v9.9.9-rc.1"], None, id="a tag renders"),
    pytest.param(["image.tag=v1 beta"], "/image/tag", id="a tag with a space is refused"),
    pytest.param(["podMonitor.enabled=yes"], "/podMonitor/enabled", id="enabled must be a boolean"),
    pytest.param(["podMonitor.interval=1m"], None, id="a Prometheus interval renders"),
    pytest.param(
        ["podMonitor.interval=often"],
        "/podMonitor/interval",
        id="an interval not a duration is refused",
    ),
    pytest.param(
        ["resources.limits.memory=2Gi", "resources.requests.cpu=1"],
        None,
        id="resource quantities render",
    ),
    pytest.param(
        ["resources.requests.cpu=lots"],
        "/resources/requests/cpu",
        id="a quantity that is not one is refused",
    ),
    pytest.param(["nodeSelector.pool=system"], None, id="a node selector renders"),
    pytest.param(["extraArgs={--watch-silence=2m}"], None, id="extra arguments render"),
    pytest.param(
        ["loglevel=INFO"], "additional properties 'loglevel'", id="a misspelt value is refused"
    ),
]


@pytest.mark.parametrize(("settings", "refused_at"), SCHEMA_CASES)
def test_the_schema_refuses_values_the_agent_would_not_take(tmp_path, settings, refused_at):
    done = helm(tmp_path, "template", str(CHART), *(f"--set={s}" for s in settings))
    if refused_at is None:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode != 0, f"{settings} rendered"
        assert "don't meet the specifications of the schema" in done.stderr, done.stderr
        assert refused_at in done.stderr, done.stderr


def _untyped(values: dict, schema: dict, prefix: str = "") -> list[str]:
    """The paths of `values` the schema gives no type (its properties, or a map's items)."""
    missing = []
    for key, value in values.items():
        node = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
        if isinstance(node, dict) and "$ref" in node:
            node = SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        if not isinstance(node, dict) or "type" not in node:
            missing.append(prefix + key)
        elif isinstance(value, dict):
            missing += _untyped(value, node, f"{prefix}{key}.")
    return missing


def test_the_schema_types_every_value_of_values_yaml():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert _untyped(values, SCHEMA) == []


def test_the_schemas_log_levels_are_pythons():
    levels = SCHEMA["properties"]["logLevel"]["enum"]
    assert all(isinstance(logging.getLevelName(level), int) for level in levels), levels


def test_the_schemas_log_formats_are_the_agents():
    option = next(p for p in main.cli.params if p.name == "log_format")
    assert SCHEMA["properties"]["logFormat"]["enum"] == list(option.type.choices)  # type: ignore[attr-defined]


DURATIONS = ["2s", "500ms", "1m30s", "1.5h", "0s", "2", "s", "5 m", "1d", "-1s", "soon", ""]


@pytest.mark.parametrize("text", DURATIONS)
def test_the_schemas_duration_is_the_agents(text):
    def parses(t: str) -> bool:
        try:
            parse_duration(t)
        except ValueError:
            return False
        return True

    pattern = SCHEMA["properties"]["minInterval"]["pattern"]
    assert bool(re.search(pattern, text)) == parses(text)
