"""The compose-inference-cluster command: a gRPC composition function server."""

from modelplane_common.server import command

from compose_inference_cluster.fn import FunctionRunner

cli = command("compose-inference-cluster", FunctionRunner)
