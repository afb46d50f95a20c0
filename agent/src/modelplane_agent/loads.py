"""What the pods bound to each node take of it: the non-device half of node capacity.

`NodeLoads` sums, per node, the requests (`snapshot.pod_requests`: cpu,
memory, one pod slot) of the non-terminated pods bound there, as
kube-scheduler's cache does (its pod informer leaves Succeeded and Failed
pods out; a pod being deleted still counts until it is gone), and of the
pods not bound yet that preemption nominated there (`status.nominatedNodeName`):
kube-scheduler's Filter counts them on their node for every pod of no higher
priority, and the agent, which cannot know the priority of the pods to come,
for all.

Invariant: `used[n]` is the sum over exactly those pods of the cluster, and
is absent when there are none. A pod event costs one subtraction and one
addition; `affected` says which nodes' loads an event changes.
"""

from __future__ import annotations

from modelplane_agent.snapshot import Pod, Resources

NOTHING = Resources()


class NodeLoads:
    def __init__(self) -> None:
        self.used: dict[str, Resources] = {}

    def of(self, node: str) -> Resources:
        return self.used.get(node, NOTHING)

    @staticmethod
    def affected(old: Pod | None, new: Pod | None) -> set[str]:
        """The nodes whose load replacing `old` by `new` changes."""
        before, after = _share(old), _share(new)
        if before == after:
            return set()
        return {share[0] for share in (before, after) if share is not None}

    def put(self, old: Pod | None, new: Pod | None) -> None:
        """Replace one pod's share of its node (None: the pod does not exist)."""
        before, after = _share(old), _share(new)
        if before == after:
            return
        for share, sign in ((before, -1), (after, 1)):
            if share is not None:
                node, requests = share
                total = self.of(node).plus(requests, sign)
                if total == NOTHING:
                    self.used.pop(node, None)
                else:
                    self.used[node] = total


def _share(pod: Pod | None) -> tuple[str, Resources] | None:
    if pod is None or pod.terminal or not pod.load_node:
        return None
    return pod.load_node, pod.requests
