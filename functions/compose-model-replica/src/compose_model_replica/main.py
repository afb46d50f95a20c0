"""The compose-model-replica command: a gRPC composition function server."""

from modelplane_common.server import command

from compose_model_replica.fn import FunctionRunner

cli = command("compose-model-replica", FunctionRunner)
