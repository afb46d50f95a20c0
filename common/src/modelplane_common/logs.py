"""Per-request logging shared by every function.

Each RunFunction logs through a logger bound to the request's tag and the
composite it reconciles (`xr_kind`, `xr_namespace`, `xr_name`), so every
line of one reconcile can be found by either. What a pass decided and how
long each phase took are logged at debug level: the SDK's `--debug` flag
turns them on, and in production (info level) they cost a no-op call.

The binding reads the request's Struct directly and tolerates any shape: a
composite without metadata logs with empty names rather than failing before
`guard.guarded` could turn the failure into a Fatal result.

A program that logs through the standard library (the agent) writes the
same JSON lines with `json_formatter`: the fields of the SDK's production
logger (`crossplane.function.logging.configure`: `level`, `filename`,
`lineno`, `ts`, `msg`, a traceback as `exception`) plus whatever a record's
`extra` binds. Its tracebacks leave out the frames' local variables (the SDK
shows them): a client's frames hold its bearer token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:  # the agent imports this module without the SDK (json_formatter)
    from crossplane.function.proto.v1 import run_function_pb2 as fnv1
    from google.protobuf import struct_pb2


def _drop(_logger: object, _method: str, _event: object) -> Any:
    raise structlog.DropEvent


# For callers that run a function without a server (tests, the benchmark):
# every method exists and nothing is written.
QUIET: Any = structlog.wrap_logger(structlog.PrintLogger(), processors=[_drop])


def json_formatter() -> logging.Formatter:
    """A `logging.Formatter` writing each record as one JSON line with the fields the
    functions' lines carry (the SDK's production processors, in its order)."""
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.processors.CallsiteParameterAdder(
                {
                    structlog.processors.CallsiteParameter.FILENAME,
                    structlog.processors.CallsiteParameter.LINENO,
                }
            ),
            structlog.stdlib.ExtraAdder(),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.TimeStamper(key="ts"),
            structlog.processors.EventRenamer(to="msg"),
            structlog.processors.JSONRenderer(),
        ],
    )


def _text(struct: struct_pb2.Struct | None, key: str) -> str:
    value = struct.fields.get(key) if struct is not None else None
    if value is None or value.WhichOneof("kind") != "string_value":
        return ""
    return value.string_value


def for_request(log: Any, req: fnv1.RunFunctionRequest) -> Any:
    """`log` bound to the request tag and the composite's kind, namespace and name."""
    xr = req.observed.composite.resource
    metadata = xr.fields.get("metadata")
    meta = (
        metadata.struct_value
        if metadata is not None and metadata.WhichOneof("kind") == "struct_value"
        else None
    )
    return log.bind(
        tag=req.meta.tag,
        xr_kind=_text(xr, "kind"),
        xr_namespace=_text(meta, "namespace"),
        xr_name=_text(meta, "name"),
    )


class Laps:
    """Seconds per named phase, measured back to back from construction."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()
        self.seconds: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        """Close `phase`: the time since the previous lap (or construction)."""
        now = self._clock()
        self.seconds[phase] = now - self._last
        self._last = now

    def as_fields(self) -> dict[str, float]:
        """The phases as log fields, in milliseconds: `{"read_ms": 1.2, ...}`."""
        return {f"{phase}_ms": round(s * 1000, 3) for phase, s in self.seconds.items()}
