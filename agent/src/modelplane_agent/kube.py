"""The Kubernetes API, as the four calls the controller needs, over lightkube.

Every kind is read as a generic resource, so objects arrive as plain JSON
mappings (decoded by msgspec inside lightkube) and are turned into the
agent's typed values once, in `modelplane_agent.snapshot`; no per-object
model classes are built for 40,000 pods. design/agent.md says why lightkube.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import httpx2
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType, on_error_raise

from modelplane_agent.state import CLAIMS, CLASSES, NODES, PODS, POOLS, REPLICAS, RULES, SLICES


class Gone(Exception):
    """The resourceVersion a watch resumed from is too old (HTTP 410): relist."""


class Idle(Exception):
    """Nothing arrived on a watch for longer than the server should stay quiet: the
    connection may be half-open, so resume on a new one."""


def retry_after(error: BaseException) -> float | None:
    """The seconds the API server asked a client to wait before trying again, if it did.

    Kubernetes says so on 429 (API Priority and Fairness, max-in-flight) and on
    some 5xx answers, in the `Retry-After` header (whole seconds) and in the
    Status' `details.retryAfterSeconds`. lightkube raises an ApiError for an
    answer it read, and httpx's HTTPStatusError for a watch request refused
    before its stream began (its body unread): both carry the response.
    """
    if not isinstance(error, httpx2.HTTPStatusError):
        return None
    response = error.response if isinstance(error.response, httpx2.Response) else None
    header = response.headers.get("Retry-After") if response is not None else None
    try:
        seconds = float(header) if header is not None else None
    except ValueError:
        seconds = None  # an HTTP date: the API server never sends one
    details = error.status.details if isinstance(error, ApiError) else None
    if seconds is None and details is not None:
        seconds = details.retryAfterSeconds
    return float(seconds) if seconds is not None and seconds >= 0 else None


def describe(error: BaseException) -> str:
    """An API error in one line, for logs and conditions: the HTTP status and the
    API server's message when it sent one ("403 Forbidden: pods is forbidden: ...")."""
    if isinstance(error, ApiError):
        status = error.status
        head = " ".join(str(part) for part in (status.code, status.reason) if part)
        message = " ".join(str(status.message or "").split())
        return f"{head}: {message}" if head and message else head or message or "ApiError"
    if isinstance(error, httpx2.HTTPStatusError):
        return f"{error.response.status_code} {error.response.reason_phrase}".strip()
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Api(Protocol):
    """What the controller asks of the API server (lightkube here, a fake in tests)."""

    async def list(self, kind: str, each: Callable[[Mapping], None]) -> str:
        """Call `each` on every object of `kind`, page by page; return the list's
        resourceVersion. Pages are not accumulated: a relist of 40,000 pods never
        holds them all at once."""
        ...

    def watch(self, kind: str, resource_version: str) -> AsyncIterator[tuple[str, Mapping]]:
        """(event type, object) from `resource_version` on, BOOKMARK events included
        (an object holding only the version it vouches for); raises Gone on 410,
        Idle when the stream has been silent too long."""
        ...

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping) -> None:
        """JSON merge patch of the status subresource (a null deletes a field)."""
        ...

    async def served(self, kind: str) -> str | None:
        """The group/version the API server serves `kind` in, the most stable one of
        those the agent reads (`served_versions`); None when it truly serves it in none
        (discovery answered so). A failure to tell raises: it is not "none"."""
        ...

    async def create_event(self, event: Mapping) -> None:
        """Create a core/v1 Event."""
        ...


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    # Of a kind whose version is discovered: every version it may be read in, the most
    # stable first (`version` is the first of them, read until discovery says otherwise).
    versions: tuple[str, ...] = ()


_KINDS = {
    NODES: _Kind("", "v1", "Node", "nodes", False),
    PODS: _Kind("", "v1", "Pod", "pods", True),
    SLICES: _Kind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    CLAIMS: _Kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True),
    CLASSES: _Kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    POOLS: _Kind("agent.modelplane.ai", "v1alpha1", "PoolObservation", "poolobservations", False),
    REPLICAS: _Kind(
        "agent.modelplane.ai", "v1alpha1", "ReplicaObservation", "replicaobservations", True
    ),
    # Served as v1alpha3 on v1.35 (behind DRADeviceTaintRules and --runtime-config),
    # v1beta2 from v1.36 and v1 from v1.37; the three share one schema for what the
    # agent reads (modelplane_agent.taint_rules), so whichever is served is read.
    RULES: _Kind(
        "resource.k8s.io",
        "v1",
        "DeviceTaintRule",
        "devicetaintrules",
        False,
        versions=("v1", "v1beta2", "v1alpha3"),
    ),
}


def kind_name(kind: str) -> str:
    """The API kind of one of the agent's watched kinds ("ResourceClaim" for resourceclaims)."""
    return _KINDS[kind].kind


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def served_versions(kind: str) -> str:
    """The group/versions a kind of discovered version may be read in, in the order
    they are preferred ("resource.k8s.io/v1, v1beta2, v1alpha3")."""
    k = _KINDS[kind]
    return f"{k.group}/{', '.join(k.versions or (k.version,))}"


@cache
def _resource(kind: str, version: str | None = None) -> Any:
    # Once per process and version: lightkube's registry refuses a second generic class
    # for a core kind (it looks core kinds up under "/v1" but registers them under "v1").
    k = _KINDS[kind]
    create = create_namespaced_resource if k.namespaced else create_global_resource
    return create(k.group, version or k.version, k.kind, k.plural)


class Undiscoverable(Exception):
    """Discovery answered with something that is not the document it asked for: not
    knowing which versions are served is a failure, never "none served"."""


@cache
def _event_resource() -> Any:
    return create_namespaced_resource("", "v1", "Event", "events")


class LightkubeApi:
    """`Api` over lightkube's asyncio client (kubeconfig or in-cluster service account)."""

    def __init__(
        self,
        client: AsyncClient,
        page_size: int = 500,
        server_timeout: int = 300,
        idle: float = 75.0,
    ) -> None:
        """`server_timeout`: the API server ends each watch request after that many
        seconds (lightkube then re-requests from the last version); `idle`: a watch
        quiet for longer raises Idle, which catches connections that died silently.
        Watches ask for bookmarks (`allowWatchBookmarks`): the API server's watch
        cache sends one about every minute and before it ends a request, once the
        kind has had an event since the server started (or etcd's progress
        notification came), and each one proves the kind current (design/agent.md,
        "Freshness")."""
        self._client = client
        self._page_size = page_size
        self._server_timeout = server_timeout
        self._idle = idle
        self._resources = {kind: _resource(kind) for kind in _KINDS}

    async def list(self, kind: str, each: Callable[[Mapping], None]) -> str:
        res = self._resources[kind]
        namespace = "*" if _KINDS[kind].namespaced else None
        listing = self._client.list(res, namespace=namespace, chunk_size=self._page_size)
        async for obj in listing:
            each(obj)
        return listing.resourceVersion

    async def watch(self, kind: str, resource_version: str) -> AsyncIterator[tuple[str, Mapping]]:
        res = self._resources[kind]
        namespace = "*" if _KINDS[kind].namespaced else None
        stream = aiter(self._watch_stream(res, namespace, resource_version))
        try:
            while True:
                try:
                    event, obj = await asyncio.wait_for(anext(stream), self._idle)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise Idle(f"no event for {self._idle:.0f}s") from None
                yield event, dict(obj)
        except ApiError as error:
            if error.status.code == 410:
                raise Gone(str(error)) from error
            raise
        except httpx2.HTTPStatusError as error:  # the watch request itself was refused
            if error.response.status_code == 410:
                raise Gone(describe(error)) from error
            raise
        finally:
            close = getattr(stream, "aclose", None)  # an async generator's
            if close is not None:
                await close()

    def _watch_stream(
        self, res: Any, namespace: str | None, resource_version: str
    ) -> AsyncIterator[tuple[str, Any]]:
        # lightkube's public watch() takes no allowWatchBookmarks; its generic client,
        # which that watch() calls, takes any query parameter (lightkube 1.0.1, pinned).
        generic = self._client._client
        request = generic.prepare_request(
            "list",
            res=res,
            namespace=namespace,
            watch=True,
            params={
                "timeoutSeconds": self._server_timeout,
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
            },
        )
        return generic.watch(request, on_error=on_error_raise)

    async def served(self, kind: str) -> str | None:
        """Discovery of the kind's group (`GET /apis/<group>`), then of each version the
        group serves, the most stable first, until one lists the kind; that version is
        then the one listed and watched. None when the group is not served (404) or no
        version of it lists the kind; any other failure, or an answer that is not a
        discovery document, raises."""
        k = _KINDS[kind]
        versions = await self._discover(f"/apis/{k.group}", "versions")
        offered = {v.get("version") for v in versions if isinstance(v, Mapping)}
        for version in k.versions or (k.version,):
            if version not in offered:
                continue
            # A version gone between the two requests (404) serves nothing.
            listed = await self._discover(f"/apis/{k.group}/{version}", "resources")
            if any(isinstance(r, Mapping) and r.get("name") == k.plural for r in listed):
                self._resources[kind] = _resource(kind, version)
                return f"{k.group}/{version}"
        return None

    async def _discover(self, path: str, entries: str) -> Sequence[Any]:
        """The `entries` list of one discovery document (an APIGroup's `versions`, an
        APIResourceList's `resources`); empty on 404 (not served)."""
        generic = self._client._client  # lightkube has no public discovery call
        response = await generic.send(generic._client.build_request("GET", path))
        if response.status_code == 404:
            return []
        generic.raise_for_status(response)
        body = response.json()
        if not isinstance(body, Mapping) or entries not in body:
            raise Undiscoverable(f"GET {path}: no {entries} list in the answer")
        listed = body[entries] if body[entries] is not None else []  # Go's nil slice: null
        if not isinstance(listed, list):
            raise Undiscoverable(f"GET {path}: no {entries} list in the answer")
        return listed

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping) -> None:
        res = self._resources[kind]
        await self._client.patch(
            res.Status,
            name,
            {"status": dict(status)},
            namespace=namespace or None,
            patch_type=PatchType.MERGE,
        )

    async def create_event(self, event: Mapping) -> None:
        await self._client.create(_event_resource()(dict(event)))

    async def close(self) -> None:
        await self._client.close()
