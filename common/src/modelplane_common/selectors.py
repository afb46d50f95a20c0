"""Kubernetes label selectors (metav1.LabelSelector), parsed once and matched purely.

The model is the API server's (apimachinery's LabelSelectorAsSelector):

    matchLabels       every `key: value` is a requirement `key In (value)`;
    matchExpressions  `In` and `NotIn` take one or more values, `Exists` and
                      `DoesNotExist` take none; any other operator is an error;
    the result        the AND of every requirement. An empty selector (no
                      requirement at all) selects everything.

`NotIn` and `DoesNotExist` select an object that lacks the key, as the API
server's do. A selector that breaks these rules is not guessed at:
`parse_label_selector` raises ValueError naming the field and the value, and
the caller decides what an unreadable selector means (an InferenceCluster
whose access selector cannot be read is an unreadable cluster: its replicas
are held and it takes no new ones, design/tenancy.md).

A bare matchLabels needs no parsing, and `selects` is its one rule, on plain
mappings: a deployment's clusterSelector (as Crossplane fetches by it), a
pool's node selector and a ReplicaObservation's pod selector are matched
with it. It agrees with the parsed form above on every string label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from modelplane_common.inputs import problem


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


_TAKES_VALUES = (Operator.IN, Operator.NOT_IN)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case Operator.IN:
                return present and labels[self.key] in self.values
            case Operator.NOT_IN:
                return not present or labels[self.key] not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


EVERYTHING = LabelSelector()


def selects(match_labels: Mapping[str, str], labels: Mapping[str, object]) -> bool:
    """A bare matchLabels: every `key: value` is among `labels` (equality only); an empty
    matchLabels selects everything."""
    return all(labels.get(k) == v for k, v in match_labels.items())


def _string(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(problem(path, "must be a non-empty string", value))
    return value


def _expression(raw: object, path: str) -> Requirement:
    if not isinstance(raw, Mapping):
        raise ValueError(problem(path, "must be an object", raw))
    key = _string(raw.get("key"), f"{path}.key")
    operator = raw.get("operator")
    if operator not in tuple(Operator):
        raise ValueError(
            problem(f"{path}.operator", "must be In, NotIn, Exists or DoesNotExist", operator)
        )
    op = Operator(operator)
    values = raw.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(problem(f"{path}.values", "must be a list of strings", values))
    if op in _TAKES_VALUES and not values:
        raise ValueError(problem(f"{path}.values", f"must be non-empty for {op}", values))
    if op not in _TAKES_VALUES and values:
        raise ValueError(problem(f"{path}.values", f"must be empty for {op}", values))
    return Requirement(key, op, frozenset(values))


def parse_label_selector(raw: object, path: str) -> LabelSelector:
    """A LabelSelector from the wire. Raises ValueError (`path.field: reason (got value)`)."""
    if not isinstance(raw, Mapping):
        raise ValueError(problem(path, "must be an object", raw))
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise ValueError(problem(f"{path}.matchLabels", "must be an object", labels))
    requirements = [
        Requirement(_string(k, f"{path}.matchLabels"), Operator.IN, frozenset([v]))
        for k, v in sorted(labels.items())
        if isinstance(v, str) or _bad_label(f"{path}.matchLabels.{k}", v)
    ]
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ValueError(problem(f"{path}.matchExpressions", "must be a list", expressions))
    requirements.extend(
        _expression(e, f"{path}.matchExpressions[{i}]") for i, e in enumerate(expressions)
    )
    return LabelSelector(tuple(requirements))


def _bad_label(path: str, value: object) -> bool:
    raise ValueError(problem(path, "must be a string", value))
