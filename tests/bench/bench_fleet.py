"""The control plane's cost at fleet scale, against its targets (a script, not a test).

    uv run python tests/bench/bench_fleet.py [--runs 30] [--save out.json] [--before out.json]

Every call goes through the function's real gRPC server (the SDK's
`FunctionRunnerService` servicer on a `grpc.aio` server bound to a free port
on 127.0.0.1, with the options `modelplane_common.server` serves with) from an
in-process client that receives like Crossplane's function runner: grpc-go's
default 4 MiB receive limit, no send limit (design/scheduler.md, "Control-plane
cost and Crossplane's message limits"). A response over 4 MiB therefore FAILS
here as it fails in Crossplane, and a request over the server's 64 MB fails
as it fails against the function's pod.

fleet-L is 48 clusters x 5 pools (240 pools) x 46 nodes (11,040 nodes of
8 GPUs) holding 8,000 ModelReplicas of other deployments, written as
compose-model-deployment writes them (templates by digest, the charge label
its rule gives; one in 50 has its pods not scheduled yet, so it is pending).
The steady and the placing rows run one reconcile as Crossplane does (the
requirement loop: call with nothing fetched, answer each requirement from
fleet-L by its selector, call again until the requirements are stable) and
print the whole reconcile (request bytes and latency summed over its calls)
and, on a second line, its last call; the XRD-maximum and the 100k rows
time the last (largest) call of such a loop. A steady deployment's replicas
all exist already (`placed`: built by its own passes, each one's replicas
observed by the next and counted by their pools, since one pass places at
most MAX_IN_FLIGHT_PER_NAMESPACE new ones). The XRD-maximum row is such a
deployment, its 1,000 replicas running with a realistic pod template: the
largest response compose-model-deployment gives, since every reconcile
composes every replica it keeps. Each other row prints
the request and response bytes of one call and its end-to-end latency over
`--runs` calls: wall-clock p50/p99 and, because the benchmark machine is
shared, the CPU time (client and server, one process) p50/p99 too. A target
is judged on wall clock. `--save` writes the figures as JSON; `--before`
reads such a file and prints its figures beside this run's, so one run shows
before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import compose_model_deployment as scheduler
import grpc
from compose_model_replica.fn import FunctionRunner as ReplicaRunner
from crossplane.function import logging, resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import template_digest
from modelplane_common.labels import CHARGE, CHARGE_COUNTED
from modelplane_common.server import DEFAULT_MAX_MESSAGE_MB
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire

sys.path.insert(0, str(Path(__file__).parent))
import bench_admission  # the admission bench's cluster and queue builders
import bench_deployment  # the deployment bench's fleet and replicas' pod template

CLUSTERS, POOLS, NODES = bench_deployment.CLUSTERS, bench_deployment.POOLS, 46
OTHERS = 8_000
FLEET_WIDE = 100_000
XRD_MAX_REPLICAS = 1000
MiB = 1024 * 1024
CROSSPLANE_MAX_RECV = 4 * MiB  # grpc-go's defaultClientMaxReceiveMessageSize
METHOD = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction"
NOW = t.NOW


# --- fleet-L ------------------------------------------------------------------------------


def realistic_template() -> dict:
    """A vLLM serving pod template of about 4 KB as JSON: image, arguments, environment,
    probes, resources, volumes: what a production ModelDeployment member carries."""
    probe = {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10}
    env = [
        {"name": f"VLLM_SETTING_{i:02d}", "value": f"value-{i:02d}-" + "v" * 40} for i in range(24)
    ]
    env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}})
    args = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "2"]
    args += [f"--option-{i}=value-{i}" for i in range(30)]
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": "vllm", "tier": "serving"}},
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": "registry.example.com/inference/vllm-openai:v0.9.0-cu124",
                    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "args": args,
                    "env": env,
                    "ports": [{"name": "http", "containerPort": 8000}],
                    "readinessProbe": probe,
                    "livenessProbe": {**probe, "failureThreshold": 6},
                    "startupProbe": {**probe, "failureThreshold": 120},
                    "resources": {
                        "requests": {"cpu": "16", "memory": "200Gi"},
                        "limits": {"memory": "200Gi"},
                    },
                    "volumeMounts": [
                        {"name": "cache", "mountPath": "/root/.cache/huggingface"},
                        {"name": "shm", "mountPath": "/dev/shm"},
                    ],
                }
            ],
            "volumes": [
                {"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}},
                {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}},
            ],
            "terminationGracePeriodSeconds": 120,
        },
    }


# One other replica in IN_FLIGHT_EVERY has its pods not scheduled yet (pending).
IN_FLIGHT_EVERY = 50


def other_replica(i: int, rnd: random.Random, inline: bool = False) -> dict:
    """Replica `i` of another deployment, as compose-model-deployment writes it: its
    member templates by digest (`inline`: in the form the previous version wrote)."""
    cluster = f"cluster-{rnd.randrange(CLUSTERS):02d}"
    pool = f"pool-{rnd.randrange(POOLS)}"
    if i % 5 == 0:
        engine = t.replica_engine("gang", pool, role="Gang", gpus=8, workers=1)
    else:
        engine = t.replica_engine("serve", pool, gpus=rnd.choice([1, 2, 4]), copies=1)
    for member in engine["members"]:
        template = bench_deployment.small_template()
        if inline:
            member["template"] = template
        else:
            member["templateDigest"] = template_digest.of(template)
    flying = i % IN_FLIGHT_EVERY == 0
    return t.model_replica(
        f"model-{i}",
        f"ns-{i % 200}",
        cluster,
        [engine],
        deployment_name=f"model-{i // 4}",
        index=i % 4,
        pods_scheduled="False" if flying else "True",
        reason="PodsPending" if flying else "AllPodsScheduled",
        scheduled_at=None if flying else t.ago(30),
    )


def others(count: int, rnd: random.Random, clusters: list[dict]) -> list[dict]:
    """`count` other replicas, each with the charge label its deployment writes on these
    clusters (t.charge_labelled: the deployment's own rule)."""
    return t.charge_labelled([other_replica(i, rnd) for i in range(count)], clusters)


def by_digest(replica: dict) -> dict:
    """The replica as compose-model-deployment now writes it: each template by digest."""
    slim = copy.deepcopy(replica)
    for engine in slim["spec"]["engines"]:
        for member in engine["members"]:
            member["templateDigest"] = template_digest.of(member.pop("template"))
    return slim


def replica_bytes(count: int = 1000) -> None:
    """A fleet-L replica on the wire (its Struct), mean of `count`: its template inline, as
    the previous version wrote it, and by digest, as every row's fleet holds it."""
    rnd = random.Random(7)
    replicas = [other_replica(i, rnd, inline=True) for i in range(count)]
    inline = sum(len(resource.dict_to_struct(r).SerializeToString()) for r in replicas)
    slim = sum(len(resource.dict_to_struct(by_digest(r)).SerializeToString()) for r in replicas)
    print(
        f"a fleet-L ModelReplica on the wire: {inline / count:,.0f} B with its template inline, "
        f"{slim / count:,.0f} B with it by digest"
    )


def our_deployment(replicas: int, template: dict | None = None) -> dict:
    engine = t.standalone(gpus=1)
    if template is not None:
        engine["members"][0]["template"] = template
    return t.deployment(replicas=replicas, engines=[engine], match_labels={"fleet": "prod"})


class NotPlacedWhole(AssertionError):
    """The deployment's passes stopped before every replica was placed and counted."""


def placed(xr: dict, clusters: list[dict]) -> dict[str, dict]:
    """Every replica of the deployment, placed and counted, as observed composed resources.

    Built as Crossplane and the agents would leave them: the deployment's own passes
    (t.schedule, through the function's entrance), each one's replicas observed by the
    next, their pods scheduled 30 minutes ago, and labelled by the deployment's charge rule
    (t.charge_labelled): counted, since every pool's fresh observation is newer. A pass
    places at most MAX_IN_FLIGHT_PER_NAMESPACE new replicas (compose_model_deployment's
    in_flight.py), so the XRD maximum takes four passes. Raises NotPlacedWhole when a pass
    adds nothing or a replica is left pending: the rows built on it measure a deployment
    whose replicas all exist."""
    wanted = int(xr["spec"]["replicas"])
    own: dict[str, dict] = {}
    while len(own) < wanted:
        plan = t.schedule(xr, clusters, own, matcher=scheduler.default_matcher())
        observed = t.own_from_plan(xr, plan, scheduled_at=t.ago(30), since=t.ago(30))
        if len(observed) <= len(own):
            raise NotPlacedWhole(f"a pass kept {len(observed)} of {wanted} replicas, placed none")
        own = dict(zip(observed, t.charge_labelled(list(observed.values()), clusters), strict=True))
    pending = [
        key for key, body in own.items() if body["metadata"]["labels"][CHARGE] != CHARGE_COUNTED
    ]
    if pending:
        raise NotPlacedWhole(f"{len(pending)} of {wanted} replicas not counted: {pending[:3]}")
    return own


def fleet_objects(xr: dict, clusters: list[dict], count: int, steady: bool):
    """What Crossplane could fetch for the deployment (the clusters, `count` other
    ModelReplicas, its own when steady, its Namespace) as (dict, Struct) pairs, and its
    own replicas as observed composed resources (steady: all of them, `placed`)."""
    rnd = random.Random(11)
    bodies = [*clusters, *others(count, rnd, clusters), t.namespace("team-a")]
    own = placed(xr, clusters) if steady else {}
    bodies.extend(own.values())
    return [(body, resource.dict_to_struct(body)) for body in bodies], own


def loop_request(
    xr: dict, own: dict[str, dict], objects, requirements: fnv1.Requirements | None
) -> bytes:
    """One call's request: what the previous response required, answered from `objects`."""
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(resource.dict_to_struct(xr))
    for key, body in own.items():
        req.observed.resources[key].resource.CopyFrom(resource.dict_to_struct(body))
    for name, selector in (requirements.resources if requirements is not None else {}).items():
        items = req.required_resources[name].items
        for body, struct in objects:
            if wire.selects(selector, body):
                items.add().resource.CopyFrom(struct)
    return req.SerializeToString()


async def requirement_loop(
    served: Served, xr: dict, clusters: list[dict], count: int, steady: bool
) -> list[bytes]:
    """Every request of one reconcile as Crossplane sends them (wire.reconcile's rule:
    call with nothing, answer each requirement, call again until a response requires
    what the previous one did)."""
    objects, own = fleet_objects(xr, clusters, count, steady)
    payloads: list[bytes] = []
    previous: fnv1.Requirements | None = None
    for _ in range(wire.MAX_CALLS):
        payloads.append(loop_request(xr, own, objects, previous))
        rsp = fnv1.RunFunctionResponse.FromString(await served.call(payloads[-1]))
        now = rsp.requirements if rsp.HasField("requirements") else None
        if now == previous:
            return payloads
        previous = now
    raise wire.RequirementsDidNotStabilize(f"{wire.MAX_CALLS} calls")


def admission_request(replicas: int, in_flight: int) -> bytes:
    """compose-model-replica's request for the last in-flight replica of a cluster holding
    `replicas` ModelReplicas (bench_admission's worst case)."""
    wire, _ = bench_admission.build(replicas, in_flight)
    return wire


# --- the server and the client ------------------------------------------------------------


@dataclass
class Figures:
    row: str
    request_bytes: int
    response_bytes: int
    ok: bool
    error: str
    wall_p50_ms: float
    wall_p99_ms: float
    cpu_p50_ms: float
    cpu_p99_ms: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


class Served:
    """One function's servicer on a grpc.aio server at 127.0.0.1:<free port>, and a client
    channel that receives like Crossplane."""

    def __init__(self, servicer: grpcv1.FunctionRunnerServiceServicer) -> None:
        limit = DEFAULT_MAX_MESSAGE_MB * MiB
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
            ]
        )
        grpcv1.add_FunctionRunnerServiceServicer_to_server(servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.channel: grpc.aio.Channel | None = None

    async def __aenter__(self) -> Served:
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{self.port}",
            options=[
                ("grpc.max_receive_message_length", CROSSPLANE_MAX_RECV),
                ("grpc.max_send_message_length", -1),
            ],
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.channel is not None
        await self.channel.close()
        await self.server.stop(grace=None)

    async def call(self, payload: bytes) -> bytes:
        assert self.channel is not None
        # Raw bytes both ways: the request is serialized once, the response measured as sent.
        unary = self.channel.unary_unary(METHOD)
        return await unary(payload, timeout=120)


async def measure(
    row: str, served: Served, payload: bytes, runs: int, check: Callable[[bytes], str] | None
) -> Figures:
    walls, cpus, answer, error = [], [], b"", ""
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            answer = await served.call(payload)
        except grpc.aio.AioRpcError as e:
            error = f"{e.code().name}: {(e.details() or '')[:120]}"
            break
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    if not error and check is not None:
        error = check(answer)
    return Figures(
        row=row,
        request_bytes=len(payload),
        response_bytes=len(answer),
        ok=not error,
        error=error,
        wall_p50_ms=statistics.median(walls) * 1000 if walls else 0.0,
        wall_p99_ms=percentile(walls, 0.99) if walls else 0.0,
        cpu_p50_ms=statistics.median(cpus) * 1000 if cpus else 0.0,
        cpu_p99_ms=percentile(cpus, 0.99) if cpus else 0.0,
    )


async def measure_loop(
    row: str, served: Served, payloads: list[bytes], runs: int, check: Callable[[bytes], str]
) -> list[Figures]:
    """A whole reconcile (every call, summed) and its last call, over `runs` reconciles."""
    totals: list[tuple[float, float]] = []
    lasts: list[tuple[float, float]] = []
    answer = b""
    for _ in range(runs):
        wall_sum = cpu_sum = 0.0
        for payload in payloads:
            wall, cpu = time.perf_counter(), time.process_time()
            answer = await served.call(payload)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            wall_sum, cpu_sum = wall_sum + wall, cpu_sum + cpu
        totals.append((wall_sum, cpu_sum))
        lasts.append((wall, cpu))
    error = check(answer)

    def figures(name: str, request_bytes: int, timed: list[tuple[float, float]]) -> Figures:
        walls, cpus = [w for w, _ in timed], [c for _, c in timed]
        return Figures(
            row=name,
            request_bytes=request_bytes,
            response_bytes=len(answer),
            ok=not error,
            error=error,
            wall_p50_ms=statistics.median(walls) * 1000,
            wall_p99_ms=percentile(walls, 0.99),
            cpu_p50_ms=statistics.median(cpus) * 1000,
            cpu_p99_ms=percentile(cpus, 0.99),
        )

    return [
        figures(f"{row}", sum(len(p) for p in payloads), totals),
        figures(f"{row}: its last call of {len(payloads)}", len(payloads[-1]), lasts),
    ]


def composed(count: int) -> Callable[[bytes], str]:
    """A check that the response composes `count` resources and reports no fatal result."""

    def check(answer: bytes) -> str:
        rsp = fnv1.RunFunctionResponse.FromString(answer)
        fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
        if fatal:
            return f"fatal: {fatal[0][:120]}"
        if len(rsp.desired.resources) != count:
            return f"composed {len(rsp.desired.resources)} resources, wanted {count}"
        return ""

    return check


# --- the rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A row's target: maxima for the request, the response and the wall-clock p99."""

    request_bytes: int | None = None
    response_bytes: int | None = None
    p99_ms: float | None = None

    def met(self, f: Figures) -> bool:
        return (
            f.ok
            and (self.request_bytes is None or f.request_bytes <= self.request_bytes)
            and (self.response_bytes is None or f.response_bytes < self.response_bytes)
            and (self.p99_ms is None or f.wall_p99_ms <= self.p99_ms)
        )

    def text(self) -> str:
        parts = []
        if self.request_bytes is not None:
            parts.append(f"request <= {self.request_bytes / 1000:,.0f} KB")
        if self.response_bytes is not None:
            parts.append(f"response < {self.response_bytes / MiB:.0f} MiB")
        if self.p99_ms is not None:
            parts.append(f"p99 <= {self.p99_ms:.0f} ms")
        return ", ".join(parts) or "every call succeeds"


async def rows(runs: int) -> list[tuple[Figures, Target]]:
    clusters = bench_deployment.fleet(NODES, random.Random(7))
    matcher = scheduler.default_matcher()
    out = []
    async with Served(scheduler.FunctionRunner(matcher, clock=lambda: NOW)) as deployments:
        for row, steady, target in (
            ("steady deployment (10 replicas)", True, Target(request_bytes=200_000, p99_ms=20)),
            (
                "deployment placing 10 replicas",
                False,
                Target(request_bytes=1_000_000, p99_ms=100),
            ),
        ):
            xr = our_deployment(10)
            payloads = await requirement_loop(deployments, xr, clusters, OTHERS, steady)
            whole, last = await measure_loop(row, deployments, payloads, runs, composed(10))
            out.extend([(whole, target), (last, Target())])
        template = realistic_template()
        biggest = our_deployment(XRD_MAX_REPLICAS, template)
        wire = resource.dict_to_struct(template).SerializeToString()
        print(
            f"realistic template: {len(json.dumps(template)) / 1000:.1f} KB as JSON, "
            f"{len(wire) / 1000:.1f} KB on the wire"
        )
        # Its 1,000 replicas already run (`placed`): every reconcile composes them all, the
        # largest response the function gives. Its last call is the steady one's.
        widest = (await requirement_loop(deployments, biggest, clusters, OTHERS, True))[-1]
        budget(widest, len(wire), matcher)
        replica_bytes()
        out.append(
            (
                await measure(
                    f"{XRD_MAX_REPLICAS} replicas running (the XRD maximum), realistic template",
                    deployments,
                    widest,
                    max(3, runs // 10),
                    composed(XRD_MAX_REPLICAS),
                ),
                Target(response_bytes=CROSSPLANE_MAX_RECV),
            )
        )
        # A deployment placing 10 replicas among 100,000: the largest call of its reconcile.
        calls = await requirement_loop(deployments, our_deployment(10), clusters, FLEET_WIDE, False)
        print(f"100k fleet-wide: {len(calls)} calls of {[len(c) // 1000 for c in calls]} KB")
        out.append(
            (
                await measure(
                    "100k fleet-wide: compose-model-deployment",
                    deployments,
                    max(calls, key=len),
                    3,
                    composed(10),
                ),
                Target(request_bytes=CROSSPLANE_MAX_RECV),
            )
        )
        del calls
    async with Served(ReplicaRunner(clock=lambda: NOW)) as replicas:
        admission = admission_request(OTHERS, 100)
        out.append(
            (
                await measure(
                    "admission: 8,000 on the cluster, 100 in flight",
                    replicas,
                    admission,
                    runs,
                    None,
                ),
                Target(p99_ms=100),
            )
        )
        per_cluster = -(-FLEET_WIDE // CLUSTERS)
        wide = admission_request(per_cluster, 100)
        out.append(
            (
                await measure(
                    f"100k fleet-wide: compose-model-replica ({per_cluster:,} on its cluster)",
                    replicas,
                    wide,
                    runs,
                    None,
                ),
                Target(request_bytes=CROSSPLANE_MAX_RECV),
            )
        )
    return out


def budget(payload: bytes, template_bytes: int, matcher: scheduler.Matcher) -> None:
    """What one composed replica costs in the XRD-maximum response, measured on the
    response as the function serializes it (Crossplane may refuse to receive it). A
    replica names its member's template by digest (modelplane_common.template_digest),
    so its size no longer grows with the template's."""
    req = fnv1.RunFunctionRequest.FromString(payload)
    rsp = scheduler.run_function(req, NOW, matcher)
    total, count = rsp.ByteSize(), len(rsp.desired.resources)
    rsp.desired.ClearField("resources")
    rest = rsp.ByteSize()  # everything but the composed replicas (their map entries too)
    per_replica = (total - rest) / count
    print(
        f"XRD-maximum response: {total:,} bytes = {count} replicas x {per_replica:.0f} B "
        f"(its {template_bytes:,} B template named by digest) + {rest:,} B status and results; "
        f"{(CROSSPLANE_MAX_RECV - total) / CROSSPLANE_MAX_RECV:.0%} of 4 MiB free"
    )


def show(results: list[tuple[Figures, Target]], before: dict[str, dict]) -> None:
    print(
        f"{'row':58s} {'request':>10s} {'response':>10s} {'p50':>7s} {'p99':>7s} "
        f"{'cpu p50':>7s} {'cpu p99':>7s}  target -> verdict"
    )
    for f, target in results:
        verdict = "met" if target.met(f) else "NOT MET"
        print(
            f"{f.row:58s} {f.request_bytes / 1000:>8,.0f}KB {f.response_bytes / 1000:>8,.0f}KB "
            f"{f.wall_p50_ms:>5.0f}ms {f.wall_p99_ms:>5.0f}ms {f.cpu_p50_ms:>5.0f}ms "
            f"{f.cpu_p99_ms:>5.0f}ms  {target.text()} -> {verdict}"
            + (f" ({f.error})" if f.error else "")
        )
        was = before.get(f.row)
        if was is not None:
            print(
                f"{'  before':58s} {was['request_bytes'] / 1000:>8,.0f}KB "
                f"{was['response_bytes'] / 1000:>8,.0f}KB {was['wall_p50_ms']:>5.0f}ms "
                f"{was['wall_p99_ms']:>5.0f}ms {was['cpu_p50_ms']:>5.0f}ms "
                f"{was['cpu_p99_ms']:>5.0f}ms" + (f"  ({was['error']})" if was["error"] else "")
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--save", type=Path, help="write this run's figures as JSON")
    parser.add_argument("--before", type=Path, help="a --save file to print beside this run")
    args = parser.parse_args()
    logging.configure(level=logging.Level.INFO)  # as the functions serve by default
    results = asyncio.run(rows(args.runs))
    before = {}
    if args.before is not None:
        before = {row["row"]: row for row in json.loads(args.before.read_text())}
    show(results, before)
    if args.save is not None:
        args.save.write_text(json.dumps([asdict(f) for f, _ in results], indent=1))


if __name__ == "__main__":
    main()
