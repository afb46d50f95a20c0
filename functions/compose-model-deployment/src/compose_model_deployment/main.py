"""The compose-model-deployment command: a gRPC composition function server."""

from modelplane_common.server import command

from compose_model_deployment.fn import FunctionRunner

cli = command("compose-model-deployment", FunctionRunner)
