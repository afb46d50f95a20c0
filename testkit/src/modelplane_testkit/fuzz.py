"""Schema-aware mutation fuzzing of the three functions through RunFunction.

Seeds are the example fleet (`examples/renders.yaml`, times filled against a
fixed clock) plus, for compose-model-deployment, the steady form of each
deployment case: its first pass's ModelReplicas fed back as observed
resources with the status compose-model-replica would publish. Requirements
are answered the way Crossplane answers them: the function runs, names what
it requires, and runs again with the matching resources from the seed's pool
until it asks for nothing new.

A mutant changes one or two nodes of one document of a seed (the XR, an
observed composed resource, or a resource Crossplane would fetch). Where the
document's kind has a schema in `apis/`, the mutation reads it:

    valid     another enum member, a flipped boolean, an integer within
              bounds, an optional field without a default removed, a time
              re-spelt in another RFC 3339 form (lower case, offset,
              fraction) - inputs the API server accepts;
    invalid   a value of another JSON type, an unknown enum member, a
              required or defaulted field removed, a malformed time -
              inputs the API server would reject, which still reach a
              function through an old object, an offline render or a bug.

Nodes without a schema (a provider's status, a workload manifest) take only
invalid mutations. Any node may also take a hostile value (`hostile`): maps
nested around the depth compose-model-deployment refuses and the depth
protobuf stops decoding (`modelplane_common.nesting`), or a string near the
size etcd stores. Every request reaches the function the way gRPC delivers
it, serialized and parsed again: one too deep to parse is answered with an
error for that composite alone (Crossplane keeps its resources), and is
counted as `undecodable`, not as a crash. `check` states what every mutant must satisfy: RunFunction
returns (no exception, no internal-error Fatal from the safety net), and on
invalid input every observed composed resource stays desired unless the
response is Fatal (Crossplane then keeps them all; tests/render proves it).
`replay` re-runs saved requests in a fresh process, for the determinism
check across hash seeds.

The test (tests/fuzz) drives this with hypothesis; `survey` counts outcomes
without stopping at the first failure, for the figures in design/.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from crossplane.function import logging
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import strategies as st
from modelplane_common.guard import INTERNAL_ERROR
from modelplane_common.nesting import MAX_TEMPLATE_DEPTH
from modelplane_devtools import render
from modelplane_devtools.paths import ROOT

from modelplane_testkit import wire

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NAME_ANNOTATION = "crossplane.io/composition-resource-name"
FUNCTION_OF_COMPOSITION = {
    "apis/inferencecluster/composition.yaml": "compose-inference-cluster",
    "apis/modelreplica/composition.yaml": "compose-model-replica",
    "apis/modeldeployment/composition.yaml": "compose-model-deployment",
}
MAX_REQUIREMENT_ROUNDS = 4

Path_ = tuple[str | int, ...]


# --- the functions --------------------------------------------------------------------------


def runner(function: str) -> Any:
    """The function's FunctionRunner with the clock fixed at NOW."""
    clock = lambda: NOW  # noqa: E731 - a clock is a one-liner
    if function == "compose-inference-cluster":
        from compose_inference_cluster import fn as cluster_fn

        return cluster_fn.FunctionRunner(clock=clock)
    if function == "compose-model-replica":
        from compose_model_replica import fn as replica_fn

        return replica_fn.FunctionRunner(clock=clock)
    import compose_model_deployment

    return compose_model_deployment.FunctionRunner(clock=clock)


_LOOP: asyncio.AbstractEventLoop | None = None


def call(function_runner: Any, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(function_runner.RunFunction(req, None))


# --- seeds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    name: str
    function: str
    xr: dict
    observed: dict[str, dict] = field(default_factory=dict)
    # Everything Crossplane could fetch for the function's requirements.
    fetchable: tuple[dict, ...] = ()

    def documents(self) -> list[tuple[str, dict]]:
        """(where, body) of every document a mutation may touch."""
        docs = [("xr", self.xr)]
        docs += [(f"observed/{n}", b) for n, b in sorted(self.observed.items())]
        docs += [(f"fetchable/{i}", b) for i, b in enumerate(self.fetchable)]
        return docs

    def with_document(self, where: str, body: dict) -> Seed:
        if where == "xr":
            return Seed(self.name, self.function, body, self.observed, self.fetchable)
        role, _, key = where.partition("/")
        if role == "observed":
            return Seed(
                self.name, self.function, self.xr, {**self.observed, key: body}, self.fetchable
            )
        fetchable = list(self.fetchable)
        fetchable[int(key)] = body
        return Seed(self.name, self.function, self.xr, self.observed, tuple(fetchable))


def _load(path: Path) -> list[dict]:
    return render.load_all(render.fill_time_tokens(path.read_text(), NOW))


def seeds() -> list[Seed]:
    found: list[Seed] = []
    for case in render.example_cases():
        function = FUNCTION_OF_COMPOSITION[case["composition"]]
        (xr,) = _load(ROOT / case["xr"])
        observed = {}
        if case.get("observed"):
            for body in _load(ROOT / case["observed"]):
                name = (body.get("metadata") or {}).get("annotations", {}).get(NAME_ANNOTATION)
                if name:
                    observed[name] = body
        fetchable = tuple(b for p in case.get("required", []) for b in _load(ROOT / p))
        seed = Seed(case["name"], function, xr, observed, fetchable)
        found.append(seed)
        if function == "compose-model-deployment":
            found.append(steady(seed))
    return found


def steady(seed: Seed) -> Seed:
    """The deployment after its first pass ran and every replica reported healthy: its
    next plan keeps every replica where it is (steady, design/scheduler.md)."""
    rsp = run(seed)
    observed = {}
    for name, body in sorted(wire.desired(rsp).items()):
        body = copy.deepcopy(body)
        stamp = "2026-11-30T11:00:00Z"
        body["status"] = {
            "scheduledAt": stamp,
            "conditions": [
                {"type": t, "status": "True", "reason": r, "lastTransitionTime": stamp}
                for t, r in (("PodsScheduled", "AllPodsScheduled"), ("Ready", "Available"))
            ],
        }
        observed[name] = body
    return Seed(seed.name + "-steady", seed.function, seed.xr, observed, seed.fetchable)


# --- running a request the way Crossplane does -----------------------------------------------


def _selected(selector: fnv1.ResourceSelector, body: Mapping) -> bool:
    if body.get("apiVersion") != selector.api_version or body.get("kind") != selector.kind:
        return False
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    if selector.HasField("match_name"):
        return meta.get("name") == selector.match_name
    found = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(found, Mapping)
    return all(found.get(k) == v for k, v in selector.match_labels.labels.items())


def through_the_wire(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionRequest:
    """The request as the function's gRPC server parses it. Raises DecodeError when
    protobuf cannot (nested past its depth limit): the server answers that call with an
    error, before any function code runs."""
    return fnv1.RunFunctionRequest.FromString(req.SerializeToString())


def _wire_request(seed: Seed, required: Mapping[str, list[dict]] | None) -> fnv1.RunFunctionRequest:
    """The request Crossplane would build. json_format, which builds it here, refuses a
    document nested about 50 levels deep; Crossplane would send it, and protobuf would
    refuse it at the server (it stops near 33): DecodeError, as `through_the_wire`."""
    try:
        return wire.request(seed.xr, seed.observed, required)
    except json_format.ParseError as err:
        raise DecodeError(f"nested past what protobuf decodes: {err}") from err


def requests(seed: Seed, function_runner: Any | None = None) -> Iterator[fnv1.RunFunctionRequest]:
    """The requests Crossplane would send, answering requirements from the seed, as the
    function receives them (`through_the_wire`; raises DecodeError)."""
    function_runner = function_runner or runner(seed.function)
    required: dict[str, list[dict]] | None = None
    for _ in range(MAX_REQUIREMENT_ROUNDS):
        req = through_the_wire(_wire_request(seed, required))
        yield req
        rsp = call(function_runner, req)
        answer = {
            name: [b for b in seed.fetchable if _selected(selector, b)]
            for name, selector in sorted(rsp.requirements.resources.items())
        }
        if answer == (required or {}):
            return
        required = answer


def run(seed: Seed, function_runner: Any | None = None) -> fnv1.RunFunctionResponse:
    """The response of the last round, when the requirements are stable."""
    function_runner = function_runner or runner(seed.function)
    rsp = fnv1.RunFunctionResponse()
    for req in requests(seed, function_runner):
        rsp = call(function_runner, req)
    return rsp


def digest(rsp: fnv1.RunFunctionResponse) -> str:
    return hashlib.sha256(rsp.SerializeToString(deterministic=True)).hexdigest()


# --- schemas ----------------------------------------------------------------------------------


def _schemas() -> dict[str, dict]:
    by_kind: dict[str, dict] = {}
    # The control plane's XRDs, and the agent's CRDs (installed on workload clusters).
    paths = sorted((ROOT / "apis").glob("*/*.yaml"))
    paths += sorted((ROOT / "deploy" / "agent" / "crds").glob("*.yaml"))
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") not in (
                "CompositeResourceDefinition",
                "CustomResourceDefinition",
            ):
                continue
            version = doc["spec"]["versions"][0]
            by_kind[doc["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return by_kind


SCHEMAS = _schemas()
MANIFEST = ("status", "atProvider", "manifest")


def schema_of(body: Mapping, path: Path_) -> dict | None:
    """The schema of the node at path, or None when no schema governs it."""
    kind = body.get("kind")
    if kind == "Object" and path[: len(MANIFEST)] == MANIFEST and len(path) > len(MANIFEST):
        manifest = body["status"]["atProvider"]["manifest"]
        return _walk(SCHEMAS.get(str(manifest.get("kind"))), path[len(MANIFEST) :])
    return _walk(SCHEMAS.get(str(kind)), path)


def _walk(schema: dict | None, path: Path_) -> dict | None:
    for step in path:
        if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
            return None
        if isinstance(step, int):
            schema = schema.get("items")
        else:
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            schema = props.get(step) or (extra if isinstance(extra, dict) else None)
    return schema


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every node below the top (the top itself is never replaced)."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield (*prefix, key)
            yield from paths(value[key], (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*prefix, i)
            yield from paths(item, (*prefix, i))


def _get(body: Any, path: Path_) -> Any:
    for step in path:
        body = body[step]
    return body


# --- mutations --------------------------------------------------------------------------------

_DELETE = object()
_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
_ODD_VALUES: tuple[Any, ...] = (None, "", "x", -1, 2.5, 1e18, True, [], {}, [1], {"a": 1}, "5")
_BAD_TIMES = (
    "yesterday",
    "2026-13-01T00:00:00Z",
    "2026-11-30T12:00:00",
    "2026-11-30",
    "12:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "2026-11-30T25:00:00Z",
    "2026-11-30T12:00:00+24:00",
)


def rfc3339_spellings(text: str) -> list[str]:
    """The same moment as other RFC 3339 spellings the API server accepts."""
    date, _, time = text.rstrip("Zz").partition("T")
    if not time:
        return []
    hh, mm, ss = [*time.split(".")[0].split(":"), "00", "00"][:3]
    return [
        f"{date}t{hh}:{mm}:{ss}z",
        f"{date}T{hh}:{mm}:{ss}.123456789Z",
        f"{date}T{hh}:{mm}:{ss}.5z",
        f"{date}T{int(hh) // 2:02d}:{mm}:{ss}-{12 - int(hh) // 2:02d}:00"
        if hh.isdigit() and int(hh) >= 12
        else f"{date}T{hh}:{mm}:{ss}+00:00",
    ]


def _looks_like_time(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] in "Tt"


@dataclass(frozen=True)
class Mutation:
    where: str
    path: Path_
    value: Any  # _DELETE removes the node
    valid: bool
    why: str

    def describe(self) -> str:
        shown = "<deleted>" if self.value is _DELETE else json.dumps(self.value)[:80]
        kind = "valid" if self.valid else "invalid"
        return f"{kind} {self.why}: {self.where}:{'.'.join(map(str, self.path))} = {shown}"


def _type_ok(schema: dict, value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    wanted = _TYPES.get(schema.get("type", ""), ())
    if isinstance(value, bool) and schema.get("type") != "boolean":
        return False
    return not wanted or isinstance(value, wanted)


_Option = tuple[bool, str, st.SearchStrategy]  # (valid, why, the values to draw from)


@st.composite
def mutation(draw: st.DrawFn, seed: Seed) -> Mutation:
    where, body = draw(st.sampled_from(seed.documents()))
    path = draw(st.sampled_from([p for p in paths(body) if p[0] not in ("apiVersion", "kind")]))
    value = _get(body, path)
    schema = schema_of(body, path)
    parent = schema_of(body, path[:-1]) if len(path) > 1 else SCHEMAS.get(str(body.get("kind")))
    options = [
        *_value_options(schema, value),
        *_time_options(value),
        _removal_option(body, path, schema, parent),
        *_hostile_options(),
    ]
    # Half the mutants valid where the node allows a valid change at all.
    wanted = draw(st.booleans())
    options = [o for o in options if o[0] == wanted] or options
    valid, why, values = draw(st.sampled_from(options))
    return Mutation(where, path, draw(values), valid, why)


def _value_options(schema: dict | None, value: Any) -> list[_Option]:
    """New values the node's schema allows or forbids (any odd value where it has none)."""
    if schema is None:
        return [(False, "unschematic value", st.sampled_from(_ODD_VALUES))]
    options: list[_Option] = []
    if "enum" in schema:
        others = [e for e in schema["enum"] if e != value]
        if others:
            options.append((True, "enum member", st.sampled_from(others)))
        options.append((False, "unknown enum member", st.just("Bogus")))
    if schema.get("type") == "boolean":
        options.append((True, "flipped", st.just(not value)))
    if schema.get("type") == "integer":
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", max(low, 64)))
        options.append((True, "in bounds", st.integers(low, min(high, low + 1000))))
        options.append((False, "below minimum", st.just(low - 1)))
    if schema.get("format") == "date-time" and isinstance(value, str):
        options.append((False, "malformed time", st.sampled_from(_BAD_TIMES)))
    odd = [v for v in _ODD_VALUES if not _type_ok(schema, v)]
    if odd:
        options.append((False, "wrong type", st.sampled_from(odd)))
    return options


# Hostile shapes: one level past the template depth the deployment refuses, the
# deepest a deployment's own request decodes, past what any request decodes, and far
# past it (json_format, which builds the harness' requests, stops at 100 levels);
# strings of 64 KiB and of 1 MiB (etcd stores objects up to 1.5 MiB).
NESTING_DEPTHS = (MAX_TEMPLATE_DEPTH + 1, 25, 28, 40, 90)
OVERSIZED_STRINGS = (64 * 1024, 1024 * 1024)


def nested_map(levels: int) -> dict:
    """`levels` maps nested in each other, a string at the bottom."""
    value: dict = {"leaf": "x"}
    for _ in range(levels - 1):
        value = {"deeper": value}
    return value


def _hostile_options() -> list[_Option]:
    return [
        (False, "deeply nested", st.sampled_from(NESTING_DEPTHS).map(nested_map)),
        (False, "oversized string", st.sampled_from(OVERSIZED_STRINGS).map(lambda n: "x" * n)),
    ]


@st.composite
def hostile(draw: st.DrawFn, seed: Seed) -> Mutation:
    """One node of one document replaced by a hostile value."""
    where, body = draw(st.sampled_from(seed.documents()))
    path = draw(st.sampled_from([p for p in paths(body) if p[0] not in ("apiVersion", "kind")]))
    _, why, values = draw(st.sampled_from(_hostile_options()))
    return Mutation(where, path, draw(values), False, why)


@st.composite
def hostile_mutants(draw: st.DrawFn, pool: Sequence[Seed]) -> Mutant:
    seed = draw(st.sampled_from(pool))
    return Mutant(seed, (draw(hostile(seed)),))


def _time_options(value: Any) -> list[_Option]:
    """A time-looking value re-spelt (still the same instant) or malformed."""
    if not (_looks_like_time(value) and rfc3339_spellings(value)):
        return []
    return [
        (True, "time re-spelt", st.sampled_from(rfc3339_spellings(value))),
        (False, "malformed time", st.sampled_from(_BAD_TIMES)),
    ]


def _removal_option(body: dict, path: Path_, schema: dict | None, parent: dict | None) -> _Option:
    """Removing the node: valid for an optional field without a default, or a list item
    whose list keeps its minItems."""
    key = path[-1]
    delete = st.just(_DELETE)
    if isinstance(key, str):
        required = set((parent or {}).get("required") or ())
        defaulted = schema is not None and "default" in schema
        optional = parent is not None and key not in required and not defaulted
        why = "optional field removed" if optional else "required field removed"
        return (optional, why, delete)
    if parent is not None and parent.get("type") == "array":
        siblings = len(_get(body, path[:-1]))
        fits = siblings - 1 >= int(parent.get("minItems", 0))
        return (fits, "list item removed", delete)
    return (False, "list item removed", delete)


def apply(seed: Seed, mutations: Sequence[Mutation]) -> Seed:
    for m in mutations:
        body = copy.deepcopy(dict(seed.documents())[m.where])
        target = _get(body, m.path[:-1])
        key = m.path[-1]
        if m.value is _DELETE:
            del target[key]
        else:
            target[key] = copy.deepcopy(m.value)
        seed = seed.with_document(m.where, body)
    return seed


@dataclass(frozen=True)
class Mutant:
    seed: Seed
    mutations: tuple[Mutation, ...]

    @property
    def valid(self) -> bool:
        return all(m.valid for m in self.mutations)

    @property
    def invalid(self) -> bool:
        """Every mutation invalid: nothing may justify dropping a composed resource.

        A mutant mixing a valid and an invalid change (a pool removed AND a
        malformed status) may lose a resource for the valid reason.
        """
        return bool(self.mutations) and not any(m.valid for m in self.mutations)

    @property
    def mutated(self) -> Seed:
        return apply(self.seed, self.mutations)

    def describe(self) -> str:
        return f"{self.seed.name}: " + "; ".join(m.describe() for m in self.mutations)


@st.composite
def mutants(draw: st.DrawFn, pool: Sequence[Seed]) -> Mutant:
    seed = draw(st.sampled_from(pool))
    count = draw(st.integers(1, 2))
    found: list[Mutation] = []
    current = seed
    for _ in range(count):
        m = draw(mutation(current))
        found.append(m)
        current = apply(current, [m])
    return Mutant(seed, tuple(found))


# --- what every mutant must satisfy -------------------------------------------------------------


@dataclass
class Outcome:
    crashed: str | None = None  # the exception, when RunFunction raised
    internal_error: str | None = None  # the safety net's Fatal message
    dropped: tuple[str, ...] = ()  # observed composed resources missing from desired
    fatal: str | None = None
    undecodable: str | None = None  # protobuf refused the request: the call fails alone
    requests: list[fnv1.RunFunctionRequest] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)

    def failure(self, invalid: bool) -> str | None:
        if self.crashed:
            return f"RunFunction raised {self.crashed}"
        if self.internal_error:
            return f"the safety net caught a crash: {self.internal_error}"
        if invalid and self.dropped:
            return f"invalid input dropped observed resources {list(self.dropped)}"
        return None


def check(mutant: Mutant, runners: Mapping[str, Any]) -> Outcome:
    seed = mutant.mutated
    function_runner = runners[seed.function]
    outcome = Outcome()
    try:
        for req in requests(seed, function_runner):
            rsp = call(function_runner, req)
            outcome.requests.append(req)
            outcome.digests.append(digest(rsp))
    except DecodeError as err:
        outcome.undecodable = str(err)[:300]
        return outcome
    except Exception as err:  # the point of the exercise
        outcome.crashed = f"{type(err).__name__}: {err}"[:300]
        return outcome
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    outcome.fatal = fatal[0] if fatal else None
    if outcome.fatal and outcome.fatal.startswith(INTERNAL_ERROR):
        outcome.internal_error = outcome.fatal[:300]
    if not fatal:
        outcome.dropped = tuple(sorted(set(seed.observed) - set(rsp.desired.resources)))
    return outcome


def all_runners() -> dict[str, Any]:
    logging.configure(logging.Level.DISABLED)
    return {f: runner(f) for f in FUNCTION_OF_COMPOSITION.values()}


# --- determinism across processes ----------------------------------------------------------------


def save(path: Path, functions_and_requests: Sequence[tuple[str, fnv1.RunFunctionRequest]]) -> None:
    lines = [
        json.dumps([f, base64.b64encode(r.SerializeToString(deterministic=True)).decode()])
        for f, r in functions_and_requests
    ]
    path.write_text("\n".join(lines) + "\n")


def replay(path: Path) -> list[str]:
    """Digests of the responses to the saved requests, in order."""
    runners = all_runners()
    out = []
    for line in path.read_text().splitlines():
        function, encoded = json.loads(line)
        req = fnv1.RunFunctionRequest.FromString(base64.b64decode(encoded))
        try:
            out.append(digest(call(runners[function], req)))
        except Exception as err:
            out.append(f"raised {type(err).__name__}")
    return out


# --- a survey: counts, for the figures in design/ ------------------------------------------------


def survey(per_function: int, seed: int = 0) -> dict[str, dict[str, int]]:
    """Run per_function mutants of each function's seeds; count every outcome."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fixed_seed

    runners = all_runners()
    pool = seeds()
    counts: dict[str, dict[str, int]] = {}
    samples: dict[str, list[str]] = {}
    for function in FUNCTION_OF_COMPOSITION.values():
        mine = [s for s in pool if s.function == function]
        tally = counts.setdefault(
            function,
            {
                "mutants": 0,
                "valid": 0,
                "crashed": 0,
                "internal": 0,
                "dropped": 0,
                "fatal": 0,
                "undecodable": 0,
            },
        )

        def record(mutant: Mutant, tally: dict[str, int] = tally, function: str = function) -> None:
            outcome = check(mutant, runners)
            tally["mutants"] += 1
            tally["valid"] += mutant.valid
            tally["crashed"] += outcome.crashed is not None
            tally["internal"] += outcome.internal_error is not None
            tally["dropped"] += bool(outcome.dropped) and mutant.invalid
            tally["fatal"] += outcome.fatal is not None
            tally["undecodable"] += outcome.undecodable is not None
            failure = outcome.failure(mutant.invalid)
            if failure:
                samples.setdefault(function, []).append(f"{mutant.describe()} -> {failure}")

        probe = fixed_seed(seed)(
            settings(
                max_examples=per_function,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )(given(mutants(mine))(_calling(record)))
        )
        probe()
    for function, lines in samples.items():
        for line in sorted(set(lines))[:40]:
            print(f"{function}: {line}", file=sys.stderr)
    return counts


def _calling(record: Callable[[Mutant], None]) -> Callable[[Mutant], None]:
    def probe(mutant: Mutant) -> None:
        record(mutant)

    return probe


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(description="Fuzz the functions through RunFunction.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("survey", help="count outcomes of N mutants per function")
    s.add_argument("--mutants", type=int, default=500)
    s.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("replay", help="print digests of saved requests (one per line)")
    r.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    if args.command == "replay":
        print("\n".join(replay(args.file)))
        return 0
    started = time.perf_counter()
    counts = survey(args.mutants, args.seed)
    print(json.dumps(counts, indent=2))
    print(f"# {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
