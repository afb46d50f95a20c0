"""One API server, spoken to through kubectl (built with the stack).

Every read and write of the e2e suite goes through here, so a failing step
can say exactly which kubectl command failed and what it printed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml
from modelplane_common.inputs import find_condition

T = TypeVar("T")


class KubectlFailed(RuntimeError):
    pass


class NotYet(AssertionError):
    """What `eventually` raises when its condition never held; says what was last seen."""


@dataclass(frozen=True)
class Kube:
    name: str
    kubectl_path: Path
    kubeconfig: Path

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, cwd: Path | None = None
    ) -> str:
        """Run kubectl on this cluster; `cwd` resolves the relative paths in `args`."""
        command = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, check=False, cwd=cwd
        )
        if check and done.returncode != 0:
            raise KubectlFailed(
                f"[{self.name}] kubectl {' '.join(args)} exited {done.returncode}: "
                f"{done.stderr.strip()}"
            )
        return done.stdout

    def apply(self, docs: Iterable[dict] | dict, *, server_side: bool = True) -> None:
        items = [docs] if isinstance(docs, dict) else list(docs)
        args = ["apply", "-f", "-"]
        if server_side:
            args += ["--server-side", "--force-conflicts", "--field-manager=modelplane-e2e"]
        self.kubectl(*args, stdin=yaml.safe_dump_all(items, sort_keys=False))

    def apply_files(self, *paths: Path) -> None:
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager=modelplane-e2e"]
        for path in paths:
            args += ["-f", str(path)]
        self.kubectl(*args)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist."""
        args = ["get", kind, name, "-o", "json", "--ignore-not-found"]
        if namespace:
            args += ["-n", namespace]
        text = self.kubectl(*args)
        return json.loads(text) if text.strip() else None

    def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[dict]:
        args = ["get", kind, "-o", "json"]
        args += ["-n", namespace] if namespace else ["--all-namespaces"]
        if selector:
            args += ["-l", selector]
        return json.loads(self.kubectl(*args))["items"]

    def patch(
        self,
        kind: str,
        name: str,
        patch: Mapping[str, object] | Sequence[Mapping[str, object]],
        *,
        namespace: str | None = None,
        kind_of_patch: str = "merge",
        subresource: str | None = None,
    ) -> None:
        args = ["patch", kind, name, f"--type={kind_of_patch}", "-p", json.dumps(patch)]
        if namespace:
            args += ["-n", namespace]
        if subresource:
            args.append(f"--subresource={subresource}")
        self.kubectl(*args)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        args = ["delete", kind, name, "--ignore-not-found", "--wait=false"]
        if namespace:
            args += ["-n", namespace]
        self.kubectl(*args)


def condition(obj: dict | None, kind: str) -> dict | None:
    """The status condition of type `kind`, or None."""
    found = find_condition(obj, kind)
    return dict(found) if found else None


def eventually(
    probe: Callable[[], T | None],
    what: str,
    *,
    timeout: float = 120,
    every: float = 1,
    not_yet: tuple[type[Exception], ...] = (),
) -> T:
    """Poll probe() every `every` seconds until it returns something truthy; fail
    (NotYet, an AssertionError) saying what was awaited and what was last seen.

    A probe may raise AssertionError to explain what it saw; the last
    explanation is in the failure. KubectlFailed, and any exception of a type
    in `not_yet` (`modelplane_testkit.oracle.NOT_SERVED` for a lightkube
    client: the object or its kind is not served yet), also mean "not yet".
    """
    deadline = time.monotonic() + timeout
    last = "never probed"
    waits_on: tuple[type[Exception], ...] = (AssertionError, KubectlFailed, *not_yet)
    while True:
        try:
            result = probe()
            if result:
                return result
            last = f"probe returned {result!r}"
        except waits_on as error:
            last = str(error) or repr(error)
        if time.monotonic() >= deadline:
            raise NotYet(f"{what}: not within {timeout:g}s; last seen: {last}")
        time.sleep(every)
