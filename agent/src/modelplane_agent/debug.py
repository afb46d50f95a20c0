"""The agent's per-node view of its pools, for tests that hold it against kube-scheduler.

The published histogram says how many nodes have each free vector, not which
ones; a test that asks kube-scheduler about one node needs to know what the
agent counted for that node. `node_view` says it: for every node of every
pool, the free devices (by the pool's device names) the report counts for it,
or why the node is left out of the histogram, or why the whole pool is not
observed. The histogram of a pool is, by construction, the multiset of its
nodes' free vectors here (the live oracle test asserts it against the
published status too).

Served at /debug/nodes only when the agent runs with --debug-nodes; never part
of a published status (the fleet reads the histogram alone). Computing it
brings every stale contribution up to date, as a publisher pass does, so it
runs on the event loop, never beside it.
"""

from __future__ import annotations

from modelplane_agent.pools import Capped, Contribution, NoRoom, Uncounted
from modelplane_agent.state import ClusterState


def node_view(state: ClusterState) -> dict:
    """{"nodes": {node: {pool: entry}}, "pools": {pool: {...}}}, in name order.

    An entry is {"free": {device name: count}} for a node in the histogram,
    {"leftOut": reason} for a node the histogram leaves out (cordoned, NotReady,
    untolerated taint), {"unobserved": reason} for every node of a pool with no
    histogram. A counted node may say why it counts less than it publishes:
    "noRoomFor" (the resource the pool's smallest pod lacks there: it counts no
    device), "cappedBy" (the resource that leaves room for fewer of its smallest
    pods than it has free devices of some kind: each kind counts at most that many;
    "uncapped" says what its devices alone leave free) or "uncounted" (devices of
    incomplete or invalid resource pools).
    """
    nodes: dict[str, dict[str, dict]] = {}
    pools: dict[str, dict] = {}
    for pool in sorted(state.pools):
        report = state.pool_report(pool)
        condition = report.condition
        pools[pool] = {
            "observedNodes": report.observed_nodes,
            "observing": {"status": condition.status, "reason": condition.reason},
        }
        kind_names = state.pools[pool].kind_names
        parts = state.pool_view.parts.get(pool, {})
        for node in sorted(state.pool_view.members.get(pool, ())):
            part = parts.get(node)
            if report.histogram is None or part is None:
                entry: dict = {"unobserved": condition.reason}
            else:
                entry = _entry(part, kind_names)
            nodes.setdefault(node, {})[pool] = entry
    return {"nodes": dict(sorted(nodes.items())), "pools": pools}


def _entry(part: Contribution, kind_names: tuple[str, ...]) -> dict:
    if isinstance(part, str):
        return {"leftOut": part}
    if isinstance(part, NoRoom):
        return {"free": dict.fromkeys(kind_names, 0), "noRoomFor": part.resource}
    if isinstance(part, Capped):
        entry = {
            "free": dict(zip(kind_names, part.vector, strict=True)),
            "cappedBy": part.resource,
            "uncapped": dict(zip(kind_names, part.uncapped, strict=True)),
        }
        return entry | ({"uncounted": list(part.causes)} if part.causes else {})
    if isinstance(part, Uncounted):
        free = dict(zip(kind_names, part.vector, strict=True))
        return {"free": free, "uncounted": list(part.causes)}
    return {"free": dict(zip(kind_names, part, strict=True))}
