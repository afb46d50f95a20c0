"""Placeholder: compose-model-replica is being written."""

from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class FunctionRunner(grpcv1.FunctionRunnerService):
    async def RunFunction(self, req, _=None):  # noqa: N802
        return response.to(req)
