"""What the e2e harness hands kwok and LeaderWorkerSet, read from their pinned modules."""

from __future__ import annotations

import os
import subprocess

import pytest
from modelplane_e2e import binaries, kwok, lws


@pytest.fixture(scope="module")
def kwok_source():
    return binaries.module_dir("workloads", kwok.MODULE)


@pytest.fixture(scope="module")
def lws_source():
    return binaries.module_dir("workloads", lws.MODULE)


def test_kwok_runs_its_default_node_and_pod_stages(kwok_source):
    stages = kwok.stages(kwok_source)
    assert {s["kind"] for s in stages} == {"Stage"}
    assert {(s["spec"]["resourceRef"]["kind"], s["metadata"]["name"]) for s in stages} == {
        ("Node", "node-initialize"),
        ("Node", "node-heartbeat-with-lease"),
        ("Pod", "pod-ready"),
        ("Pod", "pod-complete"),
        ("Pod", "pod-delete"),
    }


def test_lws_crds_are_the_modules_own(lws_source):
    names = {c["metadata"]["name"] for c in lws.crds(lws_source)}
    assert names == {
        "leaderworkersets.leaderworkerset.x-k8s.io",
        "disaggregatedsets.disaggregatedset.x-k8s.io",
    }


def test_lws_webhooks_point_at_the_local_server_and_only_see_lws_pods(lws_source):
    docs = lws.webhook_configurations(lws_source, "https://127.0.0.1:7443", "Q0E=")
    assert {d["metadata"]["name"] for d in docs} == {
        "lws-mutating-webhook-configuration",
        "lws-validating-webhook-configuration",
    }
    webhooks = [w for d in docs for w in d["webhooks"]]
    assert webhooks, "no webhooks read"
    for webhook in webhooks:
        config = webhook["clientConfig"]
        assert set(config) == {"url", "caBundle"} and config["caBundle"] == "Q0E=", webhook
        assert config["url"].startswith("https://127.0.0.1:7443/"), config["url"]
    pods = [w for w in webhooks if w["rules"][0]["resources"] == ["pods"]]
    assert len(pods) == 2, [w["name"] for w in webhooks]
    for webhook in pods:
        (selector,) = webhook["objectSelector"]["matchExpressions"]
        assert selector == {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        pytest.param(
            [{"op": "replace", "path": "/webhooks/1", "value": {"name": "b2"}}],
            {"webhooks": [{"name": "a"}, {"name": "b2"}]},
            id="replace swaps the list item the path names",
        ),
        pytest.param([], {"webhooks": [{"name": "a"}, {"name": "b"}]}, id="no patch keeps all"),
    ],
)
def test_lws_kustomization_patches_apply(operations, expected):
    assert lws._replace({"webhooks": [{"name": "a"}, {"name": "b"}]}, operations) == expected


def test_lws_kustomization_patch_other_than_replace_is_refused():
    with pytest.raises(ValueError, match="'add'"):
        lws._replace({"webhooks": []}, [{"op": "add", "path": "/webhooks/0", "value": {}}])


def test_a_module_the_go_cache_lacks_is_downloaded(tmp_path, monkeypatch):
    """A fresh machine's empty module cache: the source is fetched, never read from `.`."""
    cache = tmp_path / "gomodcache"
    monkeypatch.setenv("GOMODCACHE", str(cache))
    try:
        source = binaries.module_dir("workloads", kwok.MODULE)
        assert source.is_relative_to(cache) and source.name.startswith("kwok@v"), source
        assert kwok.stages(source)
    finally:
        # The test's own cache only, named outright: never the machine's.
        subprocess.run(
            ["go", "clean", "-modcache"], check=True, env={**os.environ, "GOMODCACHE": str(cache)}
        )
