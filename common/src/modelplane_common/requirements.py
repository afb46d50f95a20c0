"""What a function asks Crossplane to fetch: its required resources, written one way.

A response names each resource set it wants under a requirement name
(`rsp.requirements.resources[name]`, a ResourceSelector); Crossplane fetches
it and calls again with the answer under the same name
(`req.required_resources[name]`). It stops once a response requires what
the previous one did (design/reconcile.md, "Required resources"), so a
function states every requirement on every call.

A selector names an apiVersion and kind, and EXACTLY ONE of

    match_name     the one object of that name;
    match_labels   every object whose labels hold each `key: value`. Empty
                   selects every object of the kind, and must still be set
                   on the wire: a selector with neither is not "all of them".

and, when `namespace` is given, looks only in that namespace. A namespace
given as "" is still written (the field is optional on the wire, so set and
empty differs from absent).

`ResourceRequirement` is that choice as a value (`by_name`, `by_labels`);
`require` writes values onto a response. The functions build their
requirements as values and write them only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from crossplane.function.proto.v1 import run_function_pb2 as fnv1


@dataclass(frozen=True, slots=True)
class ResourceRequirement:
    """One set of resources a response asks Crossplane to fetch, under `name`.

    Selects by `match_name` when it is set, else by `match_labels` (empty:
    every object of the kind). Build it with `by_name` or `by_labels`."""

    name: str
    api_version: str
    kind: str
    match_name: str | None = None
    # Not hashed (a dict is not hashable); equal values still hash equal.
    match_labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    namespace: str | None = None

    def __post_init__(self) -> None:
        if self.match_name is not None and self.match_labels:
            raise ValueError(f"requirement {self.name}: match_name and match_labels are exclusive")

    @classmethod
    def by_name(
        cls, name: str, api_version: str, kind: str, match_name: str, namespace: str | None = None
    ) -> ResourceRequirement:
        """The object of kind `kind` named `match_name` (in `namespace` when given)."""
        return cls(name, api_version, kind, match_name=match_name, namespace=namespace)

    @classmethod
    def by_labels(
        cls,
        name: str,
        api_version: str,
        kind: str,
        match_labels: Mapping[str, str],
        namespace: str | None = None,
    ) -> ResourceRequirement:
        """Every object of kind `kind` whose labels hold `match_labels` (empty: all of
        them), in `namespace` when given."""
        return cls(name, api_version, kind, match_labels=dict(match_labels), namespace=namespace)

    def selector(self) -> fnv1.ResourceSelector:
        """The ResourceSelector Crossplane reads."""
        selector = fnv1.ResourceSelector(api_version=self.api_version, kind=self.kind)
        if self.match_name is not None:
            selector.match_name = self.match_name
        else:
            selector.match_labels.SetInParent()  # set even when empty: "all of them"
            selector.match_labels.labels.update(self.match_labels)
        if self.namespace is not None:
            selector.namespace = self.namespace
        return selector


def require(rsp: fnv1.RunFunctionResponse, *wanted: ResourceRequirement) -> None:
    """Ask Crossplane to fetch each of `wanted` before the next call; a later requirement
    of the same name replaces an earlier one."""
    for requirement in wanted:
        rsp.requirements.resources[requirement.name].CopyFrom(requirement.selector())
