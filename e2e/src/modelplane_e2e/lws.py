"""The LeaderWorkerSet controller on the workload cluster, as a process on 127.0.0.1.

LWS v0.9.0 (`tools/workloads`) runs its manager against the workload cluster: it
turns each LeaderWorkerSet into a leader StatefulSet, and each leader pod
into a StatefulSet of workers (the controller manager's StatefulSet
controller creates the pods, kube-scheduler binds them, kwok runs them). Its
webhooks default and validate LeaderWorkerSets and label their pods (the
group key our replicas spread by comes from there).

Everything comes from the module at the pinned version: the CRDs
(`config/crd/bases`), the webhook configurations (`config/webhook`, with
the two patches its kustomization applies, which narrow the pod webhooks to
LWS's own pods). In a cluster the webhooks are reached through a Service and
certificates from LWS's internal rotator; here the manager serves them on
127.0.0.1 with a certificate from the harness's CA, the rotator is off
(`internalCertManagement.enable: false`), and each webhook's clientConfig is
that URL with the CA bundle. Leader election is off: one manager runs.
"""

from __future__ import annotations

import base64
import copy
from functools import partial
from pathlib import Path

import yaml
from modelplane_devtools.processes import Process, free_port, listening

from modelplane_e2e import pki
from modelplane_e2e.cluster import Cluster
from modelplane_e2e.kube import Kube, condition, eventually

MODULE = "sigs.k8s.io/lws"
GROUP = "leaderworkerset.x-k8s.io"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
# The kustomization's name prefix for everything it installs.
PREFIX = "lws-"


def crds(source: Path) -> list[dict]:
    """Every CRD the manager watches (LeaderWorkerSet, DisaggregatedSet), as shipped."""
    return [
        yaml.safe_load(path.read_text())
        for path in sorted((source / "config" / "crd" / "bases").glob("*.yaml"))
    ]


def _replace(doc: dict, operations: list[dict]) -> dict:
    """Apply the JSON patch `replace` operations LWS's kustomization uses (`/webhooks/<i>`)."""
    doc = copy.deepcopy(doc)
    for op in operations:
        if op["op"] != "replace":
            raise ValueError(f"unexpected patch operation {op['op']!r} in LWS's kustomization")
        *parents, last = op["path"].strip("/").split("/")
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = op["value"]
    return doc


def webhook_configurations(source: Path, url: str, ca_bundle: str) -> list[dict]:
    """LWS's webhook configurations, patched as its kustomization does, pointing at `url`."""
    folder = source / "config" / "webhook"
    patches = {
        kind: yaml.safe_load((folder / patch).read_text())
        for kind, patch in (
            ("MutatingWebhookConfiguration", "mutating-patch.yaml"),
            ("ValidatingWebhookConfiguration", "validating-patch.yaml"),
        )
    }
    docs = []
    for doc in yaml.safe_load_all((folder / "manifests.yaml").read_text()):
        doc = _replace(doc, patches[doc["kind"]])
        doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
        for webhook in doc["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
        docs.append(doc)
    return docs


def configuration(webhook_port: int, cert_dir: Path) -> dict:
    """The manager's Configuration: servers on 127.0.0.1, no rotator, no leader election."""
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
    }


def _established(kube: Kube, name: str) -> bool:
    c = condition(kube.get("crd", name), "Established")
    assert c and c["status"] == "True", f"CRD {name} Established: {c}"
    return True


def start(
    cluster: Cluster,
    workdir: Path,
    ca: pki.KeyPair,
    *,
    binary: Path,
    source: Path,
    name: str = "lws",
) -> Process:
    """CRDs, then the manager, then its webhook configurations once it serves them.
    `name` names its process and its folder in `workdir`, one per workload cluster."""
    supervisor, kube, kubeconfig = cluster.supervisor, cluster.kube, cluster.kubeconfig
    definitions = crds(source)
    kube.apply(definitions)
    for crd in definitions:
        crd_name = crd["metadata"]["name"]
        eventually(partial(_established, kube, crd_name), f"CRD {crd_name} Established", timeout=60)
    home = workdir / name
    certs = home / "tls"
    serving = pki.sign(ca, certs, "webhook", pki.Subject("lws-webhook", ips=("127.0.0.1",)))
    (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
    (certs / "tls.key").write_bytes(serving.key.read_bytes())
    port = free_port()
    config = home / "configuration.yaml"
    config.write_text(yaml.safe_dump(configuration(port, certs), sort_keys=False))
    process = supervisor.start(
        name,
        [binary, f"--config={config}", "--zap-log-level=info"],
        env={"KUBECONFIG": str(kubeconfig)},
    )
    supervisor.wait_until(process, lambda: listening(port), "serving webhooks", 120)
    ca_bundle = base64.b64encode(ca.cert.read_bytes()).decode()
    kube.apply(webhook_configurations(source, f"https://127.0.0.1:{port}", ca_bundle))
    return process
