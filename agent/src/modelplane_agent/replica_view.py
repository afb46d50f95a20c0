"""The replica half of the agent's state: pods, ReplicaObservations, and who selects whom.

`ReplicaView` is fed pods and ReplicaObservations and answers which replicas
an event on a pod, a replica or a claim touches, and each replica's report
(by the pure rules of `replicas`). Nothing here knows about devices beyond
the names of the claims pods reference; whether a claim is allocated is
asked of the caller.

Invariants
    - `selected[r]` is exactly the set of names of the pods in `r`'s
      namespace its selector matches (empty while its spec has a problem);
    - `index[(namespace, key, value)]` holds every replica of that namespace
      whose least selector pair is (key, value): every pair of a selector must
      be on a pod it selects, so a pod finds all its replicas through its own
      labels without a scan of its namespace;
    - `claim_pods["namespace/claim"]` is the set of pods of that namespace whose
      `claims` name the claim, absent when there are none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from modelplane_common.selectors import selects

from modelplane_agent.replicas import ReplicaReport, observe_replica
from modelplane_agent.snapshot import (
    Pod,
    ReplicaObservationSpec,
    replica_spec_from,
    status_of,
)

ReplicaKey = tuple[str, str]  # namespace, name


class ReplicaView:
    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Pod]] = {}  # namespace -> name -> pod
        self.replicas: dict[ReplicaKey, ReplicaObservationSpec] = {}
        self.status: dict[ReplicaKey, Mapping] = {}
        self.index: dict[tuple[str, str, str], set[ReplicaKey]] = {}
        self.selected: dict[ReplicaKey, set[str]] = {}
        self.claim_pods: dict[str, set[str]] = {}

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get(namespace, {}).get(name)

    # ------------------------------------------------------------------ updates

    def put_pod(self, namespace: str, name: str, pod: Pod | None) -> set[ReplicaKey]:
        """Store (None: delete) one pod; return the replicas that select it before or after."""
        in_namespace = self.pods.setdefault(namespace, {})
        old = in_namespace.get(name)
        if pod is None:
            in_namespace.pop(name, None)
        else:
            in_namespace[name] = pod
        self._reference(namespace, name, old, pod)
        touched: set[ReplicaKey] = set()
        for key in self._candidates(namespace, old) | self._candidates(namespace, pod):
            selector = self.replicas[key].match_labels
            was = old is not None and selects(selector, old.labels)
            now = pod is not None and selects(selector, pod.labels)
            if now:
                self.selected[key].add(name)
            elif was:
                self.selected[key].discard(name)
            if was or now:
                touched.add(key)
        return touched

    def _reference(self, namespace: str, name: str, old: Pod | None, new: Pod | None) -> None:
        for claim in () if old is None else old.claims:
            pods = self.claim_pods.get(f"{namespace}/{claim}")
            if pods is not None:
                pods.discard(name)
                if not pods:
                    del self.claim_pods[f"{namespace}/{claim}"]
        for claim in () if new is None else new.claims:
            self.claim_pods.setdefault(f"{namespace}/{claim}", set()).add(name)

    def put_replica(self, key: ReplicaKey, obj: Mapping | None) -> set[ReplicaKey]:
        """Store (None: delete) one ReplicaObservation; return {key} if its spec changed."""
        if obj is None:
            self._unindex(key)
            existed = self.replicas.pop(key, None) is not None
            self.status.pop(key, None)
            self.selected.pop(key, None)
            return {key} if existed else set()
        self.status[key] = status_of(obj)
        spec = replica_spec_from(obj)
        if self.replicas.get(key) == spec:
            return set()
        self._unindex(key)
        self.replicas[key] = spec
        pair = _index_pair(spec)
        if pair is not None:
            self.index.setdefault(pair, set()).add(key)
        pods = self.pods.get(key[0], {})
        self.selected[key] = {
            n for n, p in pods.items() if not spec.problem and selects(spec.match_labels, p.labels)
        }
        return {key}

    def _candidates(self, namespace: str, pod: Pod | None) -> set[ReplicaKey]:
        """Replicas that may select `pod`: those indexed under one of its labels."""
        found: set[ReplicaKey] = set()
        if pod is not None:
            for pair in pod.labels.items():
                found |= self.index.get((namespace, *pair), set())
        return found

    def _unindex(self, key: ReplicaKey) -> None:
        spec = self.replicas.get(key)
        pair = None if spec is None else _index_pair(spec)
        if pair is not None:
            self.index.get(pair, set()).discard(key)

    # ------------------------------------------------------------------ queries

    def replicas_of_claim(self, claim: str) -> set[ReplicaKey]:
        """The replicas selecting a pod that references `claim` ("namespace/name")."""
        namespace = claim.split("/", 1)[0]
        found: set[ReplicaKey] = set()
        for name in self.claim_pods.get(claim, ()):
            for replica in self._candidates(namespace, self.pod(namespace, name)):
                if name in self.selected.get(replica, ()):
                    found.add(replica)
        return found

    def report(self, key: ReplicaKey, claim_allocated: Callable[[str, str], bool]) -> ReplicaReport:
        pods = self.pods.get(key[0], {})
        names = self.selected.get(key, set())
        return observe_replica(
            self.replicas[key], (pods[n] for n in names if n in pods), claim_allocated
        )

    def bound_nodes(self, key: ReplicaKey) -> set[str]:
        """The nodes the replica's pods are bound to."""
        pods = self.pods.get(key[0], {})
        return {
            pod.node_name
            for pod in (pods.get(name) for name in self.selected.get(key, ()))
            if pod is not None and pod.node_name
        }


def _index_pair(spec: ReplicaObservationSpec) -> tuple[str, str, str] | None:
    if spec.problem or not spec.match_labels:
        return None
    return (spec.namespace, *min(spec.match_labels.items()))
