"""The command line: what it refuses, in one line and exit status 1, before it starts."""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner
from crossplane.function import logging as sdk_logging
from modelplane_agent import main
from modelplane_agent.controller import POOLS, REPLICAS, Settings, heartbeat

KUBECONFIG_WITHOUT_CLUSTERS = "apiVersion: v1\nkind: Config\n"
NOT_YAML = "clusters: [\n"
NO_CONTEXT = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: nope
"""
# Where a pod would have its service account; empty here, even on a CI runner in a pod.
SERVICE_ACCOUNT = "{home}/serviceaccount/token"

REFUSALS = {
    "no flag, not in a cluster and no ~/.kube/config": (
        [],
        {},
        "modelplane-agent: no Kubernetes configuration: not in a cluster "
        f"(no {SERVICE_ACCOUNT}) and no kubeconfig at ~/.kube/config; pass --kubeconfig",
    ),
    "$KUBECONFIG naming a missing file": (
        [],
        {"KUBECONFIG": "{home}/missing"},
        "modelplane-agent: no Kubernetes configuration: not in a cluster "
        f"(no {SERVICE_ACCOUNT}) and no kubeconfig at {{home}}/missing; pass --kubeconfig",
    ),
    "--kubeconfig naming a missing file": (
        ["--kubeconfig={home}/missing"],
        {},
        "modelplane-agent: --kubeconfig {home}/missing: no such file",
    ),
    "--kubeconfig that is not YAML": (
        ["--kubeconfig={home}/not-yaml"],
        {},
        "modelplane-agent: --kubeconfig {home}/not-yaml: not a usable kubeconfig: while "
        "parsing a flow node expected the node content, but found '<stream end>' in "
        '"<unicode string>", line 2, column 1: ^',
    ),
    "a kubeconfig without clusters": (
        [],
        {"KUBECONFIG": "{home}/no-clusters"},
        "modelplane-agent: KUBECONFIG {home}/no-clusters: not a usable kubeconfig: "
        "clusters is not set",
    ),
    "a kubeconfig whose current context does not exist": (
        ["--kubeconfig={home}/no-context"],
        {},
        "modelplane-agent: --kubeconfig {home}/no-context: not a usable kubeconfig: "
        "Context 'nope' not found",
    ),
    "--max-age that is not a duration": (
        ["--max-age=soon"],
        {},
        "modelplane-agent: --max-age: not a duration such as 5m, 90s or 1h30m (got soon)",
    ),
    "--max-age too short for a heartbeat inside it": (
        ["--max-age=5s"],
        {},
        "modelplane-agent: --max-age must be at least 10s (got 5s)",
    ),
    "--min-interval that is not a duration": (
        ["--min-interval=2"],
        {},
        "modelplane-agent: --min-interval: not a duration such as 5m, 90s or 1h30m (got 2)",
    ),
    "--watch-silence that is not a duration": (
        ["--watch-silence=forever"],
        {},
        "modelplane-agent: --watch-silence: not a duration such as 5m, 90s or 1h30m (got forever)",
    ),
    "--watch-silence under a second": (
        ["--watch-silence=500ms"],
        {},
        "modelplane-agent: --watch-silence must be at least 1s (got 500ms)",
    ),
}


@pytest.mark.parametrize(("args", "env", "line"), REFUSALS.values(), ids=REFUSALS)
def test_it_refuses_in_one_line_and_exits_1(tmp_path: Path, monkeypatch, args, env, line):
    monkeypatch.setattr(main, "SERVICE_ACCOUNT", str(tmp_path / "serviceaccount"))
    (tmp_path / "not-yaml").write_text(NOT_YAML)
    (tmp_path / "no-clusters").write_text(KUBECONFIG_WITHOUT_CLUSTERS)
    (tmp_path / "no-context").write_text(NO_CONTEXT)
    environment = {"HOME": str(tmp_path), "KUBECONFIG": None}
    environment |= {k: v.format(home=tmp_path) for k, v in env.items()}
    result = CliRunner().invoke(
        main.cli, [a.format(home=tmp_path) for a in args], env=environment, catch_exceptions=False
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [line.format(home=tmp_path)]
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("flag", "silence", "idle"),
    [
        pytest.param("90s", 90.0, 75.0, id="the default: relisted at 75 s, not current at 90 s"),
        pytest.param("6s", 6.0, 5.0, id="a short bound keeps the same share"),
    ],
)
def test_watch_silence_sets_when_a_kind_is_not_current_and_when_it_is_relisted(flag, silence, idle):
    settings = main.settings_from("5m", "2s", flag)
    assert (settings.silence, settings.idle) == pytest.approx((silence, idle))
    assert main.settings_from(None, "2s") == Settings()  # the defaults are the Settings'


def test_pools_heartbeat_well_inside_max_age_spread_per_pool_and_replicas_never():
    age = timedelta(minutes=5)
    pools = [heartbeat((POOLS, "", f"pool-{i}"), age) for i in range(100)]
    assert all(h is not None and timedelta(seconds=45) <= h <= timedelta(seconds=60) for h in pools)
    assert heartbeat((POOLS, "", "pool-7"), age) == pools[7]  # stable: fixed by the name
    # Spread: no tenth of the range holds more than a third of the pools.
    tenths = [int((h.total_seconds() - 45) / 1.5) for h in pools if h is not None]
    assert max(tenths.count(t) for t in set(tenths)) < 34
    # A replica's report is written only when it changes: replicasCurrentAt keeps it fresh.
    assert all(heartbeat((REPLICAS, f"ns-{i % 40}", f"r-{i}"), age) is None for i in range(1000))


# --------------------------------------------------------------------------- log format


def function_line(capsys) -> dict:
    """One line as a composition function logs it in production (the SDK's logger)."""
    sdk_logging.configure(sdk_logging.Level.INFO)
    try:
        sdk_logging.get_logger().info("reconciled")
    finally:
        structlog.reset_defaults()
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def agent_line(log_format: str, error: BaseException | None = None) -> str:
    """What the agent writes for one record in `log_format`."""
    stream = io.StringIO()
    handler = main.log_handler(log_format)
    handler.setStream(stream)  # type: ignore[attr-defined]
    logger = logging.getLogger("modelplane_agent.test_main")
    logger.addHandler(handler)
    try:
        logger.warning(
            "status write failed: %s",
            "429 Too Many Requests",
            exc_info=(type(error), error, error.__traceback__) if error else None,
            extra={"resource": "poolobservations/a100"},
        )
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_json_log_line_parses_and_carries_every_field_a_functions_line_carries(capsys):
    line = json.loads(agent_line("json"))
    assert set(function_line(capsys)) - {"msg"} <= set(line)
    assert line["level"] == "warning"
    assert line["msg"] == "status write failed: 429 Too Many Requests"
    assert line["resource"] == "poolobservations/a100"
    assert (line["filename"], isinstance(line["lineno"], int)) == ("test_main.py", True)


def test_a_json_log_line_carries_a_traceback_without_local_variables():
    token = "s3cret-bearer-token"  # noqa: F841  (a local a traceback must not print)
    try:
        raise ConnectionError("API server gone")
    except ConnectionError as caught:
        line = agent_line("json", caught)
    assert "s3cret" not in line
    (raised,) = json.loads(line)["exception"]
    assert (raised["exc_type"], raised["exc_value"]) == ("ConnectionError", "API server gone")


def test_the_text_format_is_one_readable_line():
    assert agent_line("text").rstrip("\n").split(" ", 2)[2] == (
        "WARNING poolobservations/a100 status write failed: 429 Too Many Requests"
    )


def test_the_log_format_is_json_or_text_and_nothing_else():
    result = CliRunner().invoke(main.cli, ["--log-format=yaml"])
    assert result.exit_code == 2 and "'json', 'text'" in result.output
