"""Reading untrusted wire values: the rules every function shares.

A function must not trust that the API server validated what it receives:
an object written before a validation rule existed, an offline render or a
bug in another controller delivers shapes the schema forbids. So every
function reads its inputs through these helpers, and every defect becomes
one line naming the field path and the bad value:

    spec.nodePools[0].name: must be a DNS label (got 7)

The rules
    - A number is a count only when `whole_number` says so (the one
      float-to-int rule: integral and inside int64).
    - A value of the wrong shape is a defect, never an exception that
      escapes a function (see `guard.py` for the last line of defence).
    - Unknown enum values: an absent value takes the schema's default; a
      value outside the enum is NOT mapped to a default or a neighbour, it
      makes the input unresolved (`UnknownValue`). An unresolved input
      never deletes a composed resource: the function keeps what it
      observed and says why, until a person fixes the value.
    - `observation.maxAge` of an InferenceCluster defaults to DEFAULT_MAX_AGE;
      a malformed one, or one longer than LONGEST_MAX_AGE, falls back to that
      default with a warning (freshness only chooses between observed and
      whole-node accounting, never deletes; one cluster's maxAge never stops
      a reader of another cluster).
    - Every duration is bounded (`timeutil.parse_duration` refuses anything
      longer than Go's time.Duration holds, as the API server does). A
      duration with a maximum of its own (a tenant's grace periods,
      `bounded_duration`) longer than that maximum reads as the maximum, with
      a warning: a clamp only ever shortens a hold.
    - `observation.fallback` and `nodePools[].fallback` of an InferenceCluster
      are the exception to the enum rule: a value outside the enum reads as
      WholeNode with a warning (`capacity.readers.read_fallbacks`), and the
      schema check leaves them to that reader. The fallback only chooses how
      an unobserved pool is counted, never what is composed, and WholeNode
      is the choice that never over-promises; holding every replica of the
      cluster for a mistyped accounting rule would cost far more.
    - Conditions are looked up by type with `condition_in` (a `conditions`
      list) or `find_condition` (an object's status); their times
      are parsed with `timeutil.parse_time`, never with the SDK's helpers
      (which use datetime.fromisoformat and reject valid RFC 3339 times such
      as `2026-01-01t09:00:00z`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from modelplane_schemas.inferencecluster import Observation
from modelplane_schemas.inferencecluster import Spec as InferenceClusterSpec
from pydantic import BaseModel, ValidationError

from modelplane_common.timeutil import (
    DurationTooLong,
    format_duration,
    parse_duration,
    parse_time_or_none,
)

if TYPE_CHECKING:  # the agent imports this module, and its image carries no protobuf
    from google.protobuf import struct_pb2

# As the generated model (from the InferenceCluster XRD) has it.
DEFAULT_MAX_AGE_TEXT: str = Observation.model_fields["maxAge"].default
DEFAULT_MAX_AGE = parse_duration(DEFAULT_MAX_AGE_TEXT)
# The InferenceCluster XRD's maximum for observation.maxAge (its x-kubernetes-validations
# rule says the same): a report a day old says nothing about free devices now.
LONGEST_MAX_AGE = timedelta(hours=24)
OBSERVATION_MODES = ("Observed", "Declared")
DEFAULT_OBSERVATION_MODE = "Observed"
_SHOWN = 80


_INT64_LOW, _INT64_END = -(2.0**63), 2.0**63


def whole_number(value: object) -> int | None:
    """A wire number as an int when it is one, else None.

    JSON, and the protobuf Struct a function receives, has one number type,
    so 3 arrives as 3.0. A float is a whole number when it is integral and
    inside int64, the range of every integer field Kubernetes stores and of
    CEL's `int`: 2.0**63 is integral to Python, yet no int64 holds it (an
    unbounded conversion would hand CEL an int it overflows on, and report a
    count no schema allows as if it were one), so it stays a float, as do
    2.5, infinities and NaN. Python's bool is an int, a JSON true is not a
    number: it is None here.
    """
    if isinstance(value, float):
        return int(value) if value.is_integer() and _INT64_LOW <= value < _INT64_END else None
    if isinstance(value, bool):
        return None
    return value if isinstance(value, int) else None


def _integral(value: object) -> object:
    # The exact types struct_to_dict yields first: on a large request the ABC
    # checks below would cost more than the conversion itself.
    if isinstance(value, float):
        whole = value.is_integer() and _INT64_LOW <= value < _INT64_END
        return int(value) if whole else value
    if isinstance(value, dict):
        return {str(k): _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, Mapping):
        return {str(k): _integral(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_integral(v) for v in value]
    return value


def integral_object(value: Mapping) -> dict:
    """An object read from a protobuf Struct with its whole numbers (`whole_number`)
    back to ints, recursively."""
    converted = _integral(value)
    assert isinstance(converted, dict)
    return converted


def struct_object(struct: struct_pb2.Struct) -> dict:
    """A protobuf Struct as the dict `integral_object(struct_to_dict(struct))` gives, read
    in one pass (about three times faster than json_format, which the clusters and
    replicas of every request go through). Infinity and NaN raise ValueError, as
    json_format does: no JSON carries them."""
    return {key: plain_value(value) for key, value in struct.fields.items()}


def plain_value(value: struct_pb2.Value) -> object:
    """One protobuf Value as `struct_object` reads it."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        return struct_object(value.struct_value)
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number) or math.isnan(number):
            raise ValueError(f"a Struct number is {number}, which JSON cannot carry")
        whole = number.is_integer() and _INT64_LOW <= number < _INT64_END
        return int(number) if whole else number
    if kind == "list_value":
        return [plain_value(v) for v in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no kind set (json_format reads both as null)


def shown(value: object) -> str:
    """A value as a message shows it: JSON, cut to a readable length."""
    try:
        text = json.dumps(_integral(value), sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def problem(path: str, reason: str, value: object) -> str:
    """The one format of an input defect: `field.path: reason (got value)`."""
    return f"{path}: {reason} (got {shown(value)})"


class InvalidInput(ValueError):
    """An input that cannot be read; str() is the one-line `problem`."""

    def __init__(self, path: str, reason: str, value: object) -> None:
        super().__init__(problem(path, reason, value))
        self.path = path
        self.reason = reason
        self.value = value


class UnknownValue(InvalidInput):
    """A value outside its enum: the input is unresolved until someone fixes it."""


def mapping(value: object, path: str) -> Mapping:
    """An object field; absent (None) reads as empty, any other non-object is invalid."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(path, "must be an object", value)
    return value


def sequence(value: object, path: str) -> Sequence:
    """A list field; absent (None) reads as empty, any other non-list is invalid."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInput(path, "must be a list", value)
    return value


def text(value: object, path: str, default: str = "") -> str:
    """A string field; absent reads as the default."""
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(path, "must be a string", value)
    return value


def name(value: object, path: str = "metadata.name") -> str:
    """A resource's name: a non-empty string, or the resource cannot be reasoned about."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(path, "must be a non-empty string", value)
    return value


def enum(value: object, path: str, allowed: Sequence[str], default: str) -> str:
    """An enum field under the shared rule: absent is the default, unknown is unresolved."""
    if value is None:
        return default
    if not isinstance(value, str) or value not in allowed:
        raise UnknownValue(path, f"must be one of {', '.join(allowed)}", value)
    return value


def observation_mode(observation: object, path: str = "spec.observation") -> str:
    """An InferenceCluster's observation.mode. Raises InvalidInput or UnknownValue."""
    return enum(
        mapping(observation, path).get("mode"),
        f"{path}.mode",
        OBSERVATION_MODES,
        DEFAULT_OBSERVATION_MODE,
    )


def max_age(observation: object, path: str = "spec.observation") -> tuple[timedelta, str | None]:
    """An InferenceCluster's observation.maxAge, and the defect when the default replaced it
    (malformed, or longer than LONGEST_MAX_AGE)."""
    raw = observation.get("maxAge") if isinstance(observation, Mapping) else None
    if raw is None:
        return DEFAULT_MAX_AGE, None
    try:
        value = parse_duration(raw)
        if value > LONGEST_MAX_AGE:
            raise DurationTooLong(f"longer than {format_duration(LONGEST_MAX_AGE)}")
    except ValueError as err:
        return DEFAULT_MAX_AGE, problem(
            f"{path}.maxAge", f"{err}; using {DEFAULT_MAX_AGE_TEXT}", raw
        )
    return value, None


def bounded_duration(
    raw: object, path: str, *, default: timedelta, longest: timedelta
) -> tuple[timedelta, str | None]:
    """A duration field with a maximum: absent, `default`; longer than `longest` (however
    long), `longest` and the line that says so. Raises InvalidInput for a value that is not
    a duration at all."""
    if raw is None:
        return default, None
    try:
        value = parse_duration(raw)
    except DurationTooLong:
        value = None
    except ValueError as err:
        raise InvalidInput(path, str(err), raw) from err
    if value is not None and value <= longest:
        return value, None
    maximum = format_duration(longest)
    return longest, problem(path, f"longer than the maximum {maximum}; using {maximum}", raw)


def status_of(obj: object) -> Mapping:
    """obj's status, or {} when absent or not an object (status is the functions' own)."""
    status = obj.get("status") if isinstance(obj, Mapping) else None
    return status if isinstance(status, Mapping) else {}


def condition_in(conditions: object, typ: str) -> Mapping:
    """The first condition of that type in a `conditions` list, or {} if there is none.

    Tolerates every malformed shape (not a list, an entry that is not an
    object): a condition that cannot be read is a condition not set.
    """
    if not isinstance(conditions, list):
        return {}
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == typ:
            return condition
    return {}


def find_condition(obj: object, typ: str) -> Mapping:
    """The first condition of that type in obj's status.conditions, or {} if there is none
    (`condition_in`; a status that is not an object has none)."""
    status = obj.get("status") if isinstance(obj, Mapping) else None
    return condition_in(status.get("conditions") if isinstance(status, Mapping) else None, typ)


def condition_status(obj: object, typ: str) -> str:
    """ "True", "False" or "Unknown" (also for an absent or unreadable condition)."""
    status = find_condition(obj, typ).get("status")
    return status if status in ("True", "False") else "Unknown"


def condition_since(condition: Mapping) -> datetime | None:
    """A condition's lastTransitionTime, or None when absent or not a time."""
    return parse_time_or_none(condition.get("lastTransitionTime"))


def validation_problems(
    error: object, lenient: Callable[[tuple], bool] = lambda loc: False, at: tuple = ()
) -> list[str]:
    """A pydantic ValidationError as `field.path: reason (got value)` lines, no URLs, each
    path under `at` (the validated value's own path); a defect at a location `lenient`
    accepts is left to that field's own reader."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return [str(error)]
    lines = []
    for item in errors(include_url=False):
        if lenient(tuple(item.get("loc", ()))):
            continue
        path = field_path((*at, *item.get("loc", ())))
        if item.get("type") == "missing":
            lines.append(f"{path}: is required (got no value)")
        else:
            lines.append(problem(path, str(item.get("msg", "is invalid")), item.get("input")))
    return lines


Model = TypeVar("Model", bound=BaseModel)


def as_stored(model: type[Model], value: object) -> Model:
    """`value` validated against a model generated from an XRD under the rules above, as
    the API server validates what it stores: an integer only where `whole_number` says
    so (3.0 is 3; "3", true and 2.5 are not), an enum only one of its values, a string
    never coerced from a number. Raises pydantic.ValidationError (`validation_problems`).

    Pydantic's default (lax) mode would coerce "3" and true to integers; strict
    validation of the JSON text keeps every enum value a string, as it is on the wire.
    """
    return model.model_validate_json(json.dumps(_integral(value)), strict=True)


def field_path(loc: Sequence[object]) -> str:
    """("spec", "nodePools", 0, "name") as spec.nodePools[0].name."""
    path = ""
    for step in loc:
        if isinstance(step, int):
            path += f"[{step}]"
        else:
            path += f".{step}" if path else str(step)
    return path or "(the object)"


def _read_leniently(loc: tuple) -> bool:
    """The InferenceCluster fields whose reader takes any value (see the rules above)."""
    return loc in (("observation", "fallback"), ("nodeScoring",)) or (
        len(loc) == 3 and loc[0] == "nodePools" and loc[2] == "fallback"
    )


def inference_cluster_problems(spec: object) -> list[str]:
    """Everything the InferenceCluster XRD's schema forbids in a spec, one line each.

    Every function that reads an InferenceCluster's spec checks it here
    first, against the model generated from the XRD, and treats a spec with
    problems as an unresolved input.
    """
    if not isinstance(spec, Mapping):
        return [problem("spec", "must be an object", spec)]
    try:
        InferenceClusterSpec.model_validate(spec)
    except ValidationError as err:
        return [f"spec.{line}" for line in validation_problems(err, _read_leniently)]
    return []
