"""Each packaged runtime serves RunFunction over mTLS, as Crossplane runs it.

The image's entrypoint starts from the unpacked package under bubblewrap: the
root read-only, the image's non-root user, the image's environment, and
TLS_SERVER_CERTS_DIR pointing at test-made certificates (tls.crt, tls.key,
ca.crt), as Crossplane sets it. Tests in this module run in file order for
each function; the last one stops the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_devtools import packages, render
from modelplane_testkit import wire

FUNCTIONS = render.FUNCTIONS
TAG = "package-mtls-test"


@dataclass
class Served:
    name: str
    runtime: packages.Runtime
    started: packages.Started
    port: int
    log: Path


@pytest.fixture(scope="module", params=FUNCTIONS)
def served(request, runtimes, certificates, tmp_path_factory) -> Iterator[Served]:
    name = request.param
    port = render._free_port()
    log = tmp_path_factory.mktemp(name) / "function.log"
    started = packages.start(
        runtimes[name],
        ["--address", f"127.0.0.1:{port}"],
        log=log,
        tls_dir=certificates.server_dir,
    )
    try:
        render._wait_for_port(port, started.process, name)
        yield Served(name, runtimes[name], started, port, log)
    finally:
        if started.process.poll() is None:
            started.terminate()


def _run_function(port: int, credentials: grpc.ChannelCredentials):
    request = wire.request({"apiVersion": "modelplane.ai/v1alpha1", "kind": "Probe",
                            "metadata": {"name": "mtls"}})  # fmt: skip
    request.meta.tag = TAG
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        return grpcv1.FunctionRunnerServiceStub(channel).RunFunction(request, timeout=30)


def test_runs_as_the_image_user_with_no_capabilities_on_a_read_only_root(served):
    confinement = packages.Confinement.of(served.started.pid)
    assert served.runtime.uid != 0
    assert confinement.uids == (served.runtime.uid,) * 4
    assert confinement.effective_capabilities == 0
    assert "ro" in confinement.root_options, confinement.root_options


def test_answers_a_client_holding_the_client_certificate(served, certificates):
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certificates.ca,
        private_key=certificates.client_key,
        certificate_chain=certificates.client_cert,
    )
    response = _run_function(served.port, credentials)
    assert response.meta.tag == TAG, served.log.read_text()


def test_refuses_a_client_without_a_certificate(served, certificates):
    credentials = grpc.ssl_channel_credentials(root_certificates=certificates.ca)
    with pytest.raises(grpc.RpcError) as refused:
        _run_function(served.port, credentials)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_exits_cleanly_on_sigterm(served):
    assert served.started.terminate() == 0, served.log.read_text()
