"""The lightkube adapter speaks the API server's wire: paths, paging, watch, 410, status patch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx2
import pytest
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status
from modelplane_agent.kube import Gone, Idle, LightkubeApi, Undiscoverable, describe, retry_after
from modelplane_agent.state import NODES, PODS, POOLS, REPLICAS, RULES
from modelplane_testkit import agent_builders as t


class Server:
    """Answers like an API server; records every request."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        params = request.url.params
        if request.method in ("PATCH", "POST"):
            return httpx2.Response(200, json=json.loads(request.content))
        if params.get("watch") == "true":
            if params.get("resourceVersion") == "9":
                bookmark = {
                    "kind": "Node",
                    "apiVersion": "v1",
                    "metadata": {
                        "resourceVersion": "12",
                        "annotations": {"k8s.io/initial-events-end": "false"},
                    },
                }
                return httpx2.Response(
                    200, content=json.dumps({"type": "BOOKMARK", "object": bookmark}) + "\n"
                )
            if params.get("resourceVersion") == "1":
                gone = {
                    "type": "ERROR",
                    "object": {"kind": "Status", "code": 410, "message": "too old"},
                }
                return httpx2.Response(200, content=json.dumps(gone) + "\n")
            node = {**t.node("n9"), "metadata": {"name": "n9", "resourceVersion": "8"}}
            return httpx2.Response(
                200, content=json.dumps({"type": "ADDED", "object": node}) + "\n"
            )
        if params.get("continue") == "page2":
            return httpx2.Response(
                200,
                json={"metadata": {"resourceVersion": "7"}, "items": [t.node("n2")]},
            )
        return httpx2.Response(
            200,
            json={
                "metadata": {"resourceVersion": "7", "continue": "page2"},
                "items": [t.node("n1")],
            },
        )


def api_for(server: Callable[[httpx2.Request], httpx2.Response]) -> LightkubeApi:
    client = AsyncClient(
        config=KubeConfig.from_dict(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://apiserver.test"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        ),
        transport=httpx2.MockTransport(server),
    )
    return LightkubeApi(client, page_size=1)


def test_a_list_follows_pages_and_returns_the_list_version():
    server = Server()
    items: list = []
    version = asyncio.run(api_for(server).list(NODES, items.append))
    assert [i["metadata"]["name"] for i in items] == ["n1", "n2"]
    assert version == "7"
    assert server.requests[0].url.path == "/api/v1/nodes"
    assert server.requests[0].url.params["limit"] == "1"


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        (PODS, "/api/v1/pods"),
        (POOLS, "/apis/agent.modelplane.ai/v1alpha1/poolobservations"),
        (REPLICAS, "/apis/agent.modelplane.ai/v1alpha1/replicaobservations"),
        (RULES, "/apis/resource.k8s.io/v1/devicetaintrules"),
    ],
    ids=[
        "pods across namespaces",
        "pool observations",
        "replica observations everywhere",
        "device taint rules at v1 until discovery says otherwise",
    ],
)
def test_every_kind_is_listed_cluster_wide(kind, path):
    server = Server()
    asyncio.run(api_for(server).list(kind, lambda _: None))
    assert server.requests[0].url.path == path


def test_a_watch_resumes_from_the_given_version():
    server = Server()

    async def first_event():
        async for event in api_for(server).watch(NODES, "7"):
            return event
        return None

    event, obj = asyncio.run(first_event())  # type: ignore[misc]
    assert (event, obj["metadata"]["name"]) == ("ADDED", "n9")
    assert server.requests[0].url.params["resourceVersion"] == "7"


def test_a_watch_asks_for_bookmarks_and_yields_them():
    server = Server()

    async def first_event():
        async for event in api_for(server).watch(NODES, "9"):
            return event
        return None

    event, obj = asyncio.run(first_event())  # type: ignore[misc]
    assert (event, obj["metadata"]["resourceVersion"]) == ("BOOKMARK", "12")
    params = server.requests[0].url.params
    assert (params["watch"], params["allowWatchBookmarks"]) == ("true", "true")


def test_a_410_in_the_watch_stream_is_gone():
    async def drain():
        async for _ in api_for(Server()).watch(NODES, "1"):
            pass

    with pytest.raises(Gone):
        asyncio.run(drain())


def test_a_watch_silent_for_too_long_is_idle():
    class Silent(Server):
        def __call__(self, request):
            self.requests.append(request)
            return httpx2.Response(200, stream=Hanging())

    class Hanging(httpx2.AsyncByteStream):
        async def __aiter__(self):
            await asyncio.sleep(3600)
            yield b""

    server = Silent()
    api = LightkubeApi(api_for(server)._client, idle=0.2)

    async def drain():
        async for _ in api.watch(NODES, "7"):
            pass

    with pytest.raises(Idle):
        asyncio.run(drain())
    assert server.requests[0].url.params["timeoutSeconds"] == "300"


def test_status_is_merge_patched_on_the_status_subresource():
    server = Server()
    status = {"observedNodes": 3, "nodesByFreeDevices": None}
    asyncio.run(api_for(server).patch_status(REPLICAS, "team", "r", status))
    request = server.requests[0]
    assert request.url.path == (
        "/apis/agent.modelplane.ai/v1alpha1/namespaces/team/replicaobservations/r/status"
    )
    assert request.headers["content-type"] == "application/merge-patch+json"
    assert json.loads(request.content) == {"status": status}


def test_an_event_is_created_in_its_namespace():
    server = Server()
    event = {
        "metadata": {"generateName": "a100.", "namespace": "default"},
        "involvedObject": {"kind": "PoolObservation", "name": "a100"},
        "type": "Warning",
        "reason": "DeviceClassNotFound",
        "message": "device kind gpu: DeviceClass gpu does not exist",
    }
    asyncio.run(api_for(server).create_event(event))
    request = server.requests[0]
    assert (request.method, request.url.path) == ("POST", "/api/v1/namespaces/default/events")
    assert json.loads(request.content)["reason"] == "DeviceClassNotFound"


def api_error(code: int, headers: dict[str, str], details: dict | None = None) -> ApiError:
    request = httpx2.Request("PATCH", "https://apiserver.test/x")
    body = {"kind": "Status", "code": code, "message": "slow down"}
    if details is not None:
        body["details"] = details
    headers = {"Content-Type": "application/json", **headers}
    response = httpx2.Response(code, headers=headers, json=body, request=request)
    return ApiError(request=request, response=response)


RETRY_AFTER = {
    "429 with a Retry-After header": (api_error(429, {"Retry-After": "7"}), 7.0),
    "503 with a Retry-After header": (api_error(503, {"Retry-After": "1"}), 1.0),
    "429 with retryAfterSeconds in the Status only": (
        api_error(429, {}, {"retryAfterSeconds": 3}),
        3.0,
    ),
    "the header wins over the Status": (
        api_error(429, {"Retry-After": "5"}, {"retryAfterSeconds": 3}),
        5.0,
    ),
    "an HTTP-date Retry-After is not read": (
        api_error(503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}),
        None,
    ),
    "a 403 asks nothing": (api_error(403, {}), None),
    "an error in the watch stream (no response) asks nothing": (
        ApiError(status=Status(code=500, message="internal error")),
        None,
    ),
    "a connection error asks nothing": (ConnectionError("reset by peer"), None),
}


@pytest.mark.parametrize(("error", "seconds"), RETRY_AFTER.values(), ids=RETRY_AFTER)
def test_retry_after_is_what_the_api_server_asked(error, seconds):
    assert retry_after(error) == seconds


DESCRIBED = {
    "an API answer: its code, reason and message": (
        ApiError(status=Status(code=403, reason="Forbidden", message="pods is forbidden")),
        "403 Forbidden: pods is forbidden",
    ),
    "a watch request refused before its stream (body unread): its status line": (
        httpx2.HTTPStatusError(
            "Client error '403 Forbidden' for url 'https://apiserver.test/api/v1/pods'",
            request=httpx2.Request("GET", "https://apiserver.test/api/v1/pods"),
            response=httpx2.Response(403),
        ),
        "403 Forbidden",
    ),
    "anything else: its type and text on one line": (
        ConnectionError("connection\n reset"),
        "ConnectionError: connection reset",
    ),
}


@pytest.mark.parametrize(("error", "line"), DESCRIBED.values(), ids=DESCRIBED)
def test_describe_says_an_error_in_one_line(error, line):
    assert describe(error) == line


def test_a_410_refusing_the_watch_request_is_gone():
    class Expired(Server):
        def __call__(self, request):
            self.requests.append(request)
            return httpx2.Response(410, json={"kind": "Status", "code": 410})

    async def drain():
        async for _ in api_for(Expired()).watch(NODES, "7"):
            pass

    with pytest.raises(Gone):
        asyncio.run(drain())


def discovery(code: int, body: object) -> Callable[[httpx2.Request], httpx2.Response]:
    return lambda request: httpx2.Response(code, json=body)


GROUP = "/apis/resource.k8s.io"
RULES_LISTED = [
    {"name": "devicetaintrules", "kind": "DeviceTaintRule", "namespaced": False},
    {"name": "devicetaintrules/status", "kind": "DeviceTaintRule", "namespaced": False},
]
SLICES_LISTED = [{"name": "resourceslices", "kind": "ResourceSlice", "namespaced": False}]


def resource_server(
    versions: dict[str, list[dict] | None],
) -> Callable[[httpx2.Request], httpx2.Response]:
    """An API server whose resource.k8s.io group offers `versions` (each with the
    resources its discovery lists; None: offered by the group, yet 404 when asked)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == GROUP:
            offered = [{"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in versions]
            return httpx2.Response(
                200, json={"kind": "APIGroup", "name": "resource.k8s.io", "versions": offered}
            )
        version, _, plural = path.removeprefix(GROUP + "/").partition("/")
        listed = versions.get(version) if path.startswith(GROUP + "/") else None
        if listed is not None and not plural:
            return httpx2.Response(200, json={"kind": "APIResourceList", "resources": listed})
        if listed is not None and any(r["name"] == plural for r in listed):  # a list of it
            return httpx2.Response(200, json={"metadata": {"resourceVersion": "3"}, "items": []})
        return httpx2.Response(404, json={"kind": "Status", "code": 404})

    return answer


ALL_THREE = {"v1": RULES_LISTED, "v1beta2": RULES_LISTED, "v1alpha3": RULES_LISTED}


@pytest.mark.parametrize(
    ("versions", "served"),
    [
        pytest.param(
            {"v1": SLICES_LISTED, "v1alpha3": RULES_LISTED},
            "v1alpha3",
            id="v1.35 with the alpha API on: read as v1alpha3",
        ),
        pytest.param(
            {"v1": SLICES_LISTED, "v1beta2": RULES_LISTED},
            "v1beta2",
            id="v1.36 with the beta API on: read as v1beta2",
        ),
        pytest.param(
            {"v1": SLICES_LISTED, "v1beta2": RULES_LISTED, "v1alpha3": RULES_LISTED},
            "v1beta2",
            id="v1.36 serving beta and alpha: beta preferred",
        ),
        pytest.param(
            {"v1": RULES_LISTED + SLICES_LISTED, "v1beta2": RULES_LISTED},
            "v1",
            id="v1.37: read as v1",
        ),
        pytest.param(ALL_THREE, "v1", id="v1, v1beta2 and v1alpha3 all served: v1 preferred"),
        pytest.param(
            {"v1": RULES_LISTED, "v1alpha3": RULES_LISTED},
            "v1",
            id="v1 and v1alpha3 served: v1 preferred",
        ),
        pytest.param(
            {"v1": None, "v1beta2": RULES_LISTED},
            "v1beta2",
            id="a version the group offers but that answers 404 is skipped",
        ),
        pytest.param(
            {"v1": SLICES_LISTED, "v1beta1": RULES_LISTED},
            None,
            id="a version the agent does not read serves it in none the agent reads",
        ),
        pytest.param({"v1": SLICES_LISTED}, None, id="v1.35 by default: served in no version"),
        pytest.param(
            {"v1": SLICES_LISTED, "v1alpha3": SLICES_LISTED},
            None,
            id="a version listing only other resources does not serve it",
        ),
    ],
)
def test_discovery_finds_the_most_stable_version_serving_device_taint_rules(versions, served):
    server = resource_server(versions)
    asked: list[str] = []

    def recording(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        return server(request)

    api = api_for(recording)

    async def discover_then_list() -> str | None:
        found = await api.served(RULES)
        if found is not None:
            await api.list(RULES, lambda _: None)
        return found

    assert asyncio.run(discover_then_list()) == (f"resource.k8s.io/{served}" if served else None)
    if served:
        assert asked[-1] == f"/apis/resource.k8s.io/{served}/devicetaintrules"


def test_discovery_asks_the_group_then_versions_most_stable_first_with_credentials():
    requests: list[httpx2.Request] = []
    server = resource_server({"v1alpha3": RULES_LISTED, "v1beta2": SLICES_LISTED, "v1": []})

    def recording(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return server(request)

    assert asyncio.run(api_for(recording).served(RULES)) == "resource.k8s.io/v1alpha3"
    assert [r.url.path for r in requests] == [
        GROUP,
        f"{GROUP}/v1",
        f"{GROUP}/v1beta2",
        f"{GROUP}/v1alpha3",
    ]
    assert all(r.headers["Authorization"] == "Bearer t" for r in requests)


def test_a_group_the_api_server_does_not_serve_serves_it_in_none():
    answer = discovery(404, {"kind": "Status", "code": 404})
    assert asyncio.run(api_for(answer).served(RULES)) is None


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(discovery(200, ["not", "a", "group"]), id="a group answer that is a list"),
        pytest.param(discovery(200, {"kind": "APIGroup"}), id="a group answer without versions"),
        pytest.param(
            lambda request: httpx2.Response(
                200,
                json={"kind": "APIGroup", "versions": [{"version": "v1"}]}
                if request.url.path == GROUP
                else {"kind": "APIResourceList"},
            ),
            id="a version answer without resources",
        ),
    ],
)
def test_discovery_that_answers_nonsense_is_a_failure_not_none(answer):
    with pytest.raises(Undiscoverable):
        asyncio.run(api_for(answer).served(RULES))


def test_discovery_that_fails_otherwise_raises():
    answer = discovery(503, {"kind": "Status", "code": 503, "message": "etcd is down"})
    with pytest.raises(ApiError) as raised:
        asyncio.run(api_for(answer).served(RULES))
    assert describe(raised.value).startswith("503")
