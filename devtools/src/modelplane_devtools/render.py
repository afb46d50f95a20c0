"""Render modelplane compositions with the real Crossplane CLI, no Docker.

`Functions` starts the three composition functions of this workspace as
local gRPC servers (`--insecure`, each on a free loopback port) and writes a
functions file whose Development runtime annotations point the CLI at them.
`Functions.render` then runs `crossplane composition render` with the core
binary given by `--crossplane-binary` and returns the rendered resources as
dicts. `validate` runs `crossplane resource validate` fully offline.

Example files may hold time tokens, replaced when a case is rendered so that
freshness is judged against the real clock the functions read:
`__NOW__`, `__NOW-<duration>__` (for example `__NOW-20m__`) and
`__NOW+<duration>__` (a lease still to run).

The tools are looked up in `.tools/bin` of the repository (installed by
`make setup`) unless CROSSPLANE, CROSSPLANE_CORE, KUBECTL or HELM name them. A missing
tool is an error, never a skip.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from modelplane_devtools import packages
from modelplane_devtools.paths import ROOT, THIRD_PARTY_CRDS, ToolMissing, binary

FUNCTIONS = ("compose-inference-cluster", "compose-model-replica", "compose-model-deployment")
FUNCTIONS_FILE = ROOT / "examples" / "functions.yaml"

_TOKEN = re.compile(r"__NOW(?:(?P<sign>[-+])(?P<ago>[0-9hms.]+))?__")
_UNITS = {"h": 3600, "m": 60, "s": 1}


class _PlainLoader(yaml.SafeLoader):
    """A safe loader that keeps timestamps as the strings Kubernetes sends."""


_PlainLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_all(text: str) -> list[dict]:
    """Every non-empty YAML document in text; timestamps stay strings."""
    return [d for d in yaml.load_all(text, Loader=_PlainLoader) if d]


def crossplane() -> Path:
    return binary("crossplane", "CROSSPLANE")


def crossplane_core() -> Path:
    return binary("crossplane-core", "CROSSPLANE_CORE")


def kubectl() -> Path:
    """kubectl, whose built-in kustomize renders deploy/agent."""
    return binary("kubectl", "KUBECTL")


def kustomize(directory: Path) -> list[dict]:
    """`kubectl kustomize <directory>`: what `kubectl apply -k` would apply."""
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return load_all(done.stdout)


def helm() -> Path:
    """Helm, which lints and renders deploy/helm/modelplane-agent."""
    return binary("helm", "HELM")


# The kinds our composed resources use from other projects; each must have a
# CRD in THIRD_PARTY_CRDS.
THIRD_PARTY_KINDS = frozenset(
    {
        ("kubernetes.m.crossplane.io", "Object"),
        ("kubernetes.m.crossplane.io", "ProviderConfig"),
        ("kubernetes.m.crossplane.io", "ClusterProviderConfig"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    }
)


def third_party_crds(folder: Path = THIRD_PARTY_CRDS) -> list[Path]:
    """The third-party CRD files; raises ToolMissing unless every THIRD_PARTY_KINDS is there."""
    files = sorted(folder.glob("*.yaml"))
    found = set()
    for path in files:
        for crd in load_all(path.read_text()):
            found.add((crd["spec"]["group"], crd["spec"]["names"]["kind"]))
    missing = sorted(f"{group}/{kind}" for group, kind in THIRD_PARTY_KINDS - found)
    if missing:
        raise ToolMissing(f"no CRD for {', '.join(missing)} in {folder}: run `make setup`")
    return files


def _offset(match: re.Match) -> timedelta:
    """How far from the clock a matched token stands: before it for `-`, after for `+`."""
    seconds = 0.0
    for number, unit in re.findall(r"([0-9.]+)([hms])", match.group("ago") or ""):
        seconds += float(number) * _UNITS[unit]
    return timedelta(seconds=-seconds if match.group("sign") == "-" else seconds)


def token_offset(text: object) -> timedelta | None:
    """The offset from the clock a whole time token stands for (`__NOW-1m__`: minus a
    minute); None when `text` is not one."""
    match = _TOKEN.fullmatch(text) if isinstance(text, str) else None
    return _offset(match) if match else None


def fill_time_tokens(text: str, now: datetime | None = None) -> str:
    """Replace __NOW__, __NOW-<duration>__ and __NOW+<duration>__ with RFC 3339 times."""
    now = now or datetime.now(UTC)

    def replace(match: re.Match) -> str:
        return (now + _offset(match)).strftime("%Y-%m-%dT%H:%M:%SZ")

    return _TOKEN.sub(replace, text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{name} did not listen on port {port} within {timeout}s")


# How a function is started: its program and server arguments give the command.
Command = Callable[[str, Sequence[str]], list[str]]


def program_of(package: str) -> str:
    """The function a package reference holds: its repository's last path element.

    `ghcr.io/modelplane-ai/compose-model-replica:v0.1.0` is compose-model-replica,
    the console script, the package's directory under functions/ and its
    dist/xpkg file; the Function object's name is the package manager's
    (`modelplane-ai-compose-model-replica`), which the Compositions reference.
    """
    repository = package.rsplit("@", 1)[0]
    last = repository.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def dev_command(name: str, args: Sequence[str]) -> list[str]:
    """The function's console script in this (the development) environment."""
    return [str(Path(sys.executable).parent / name), *args]


@dataclass
class Functions:
    """The workspace's functions running locally, for the CLI's Development runtime.

    `command` starts each one: from the development venv by default, or from
    an unpacked Function package (`modelplane_devtools.packages`).
    """

    workdir: Path
    command: Command = dev_command
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def functions_file(self) -> Path:
        return self.workdir / "functions.yaml"

    def start(self) -> None:
        docs = []
        for function in yaml.safe_load_all(FUNCTIONS_FILE.read_text()):
            name = function["metadata"]["name"]
            program = program_of(function["spec"]["package"])
            port = _free_port()
            log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - lives as long as the process
            process = subprocess.Popen(
                self.command(program, ["--insecure", "--address", f"127.0.0.1:{port}"]),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            self.processes.append(process)
            _wait_for_port(port, process, name)
            self.ports[name] = port
            function["metadata"].setdefault("annotations", {}).update(
                {
                    "render.crossplane.io/runtime": "Development",
                    "render.crossplane.io/runtime-development-target": f"127.0.0.1:{port}",
                }
            )
            docs.append(function)
        self.functions_file.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()

    def _materialize(self, name: str, source: Path | str | Sequence | dict) -> Path:
        """Write an input (files, a directory, or dicts) to one file, filling time tokens."""
        if isinstance(source, dict):
            text = yaml.safe_dump(source, sort_keys=False)
        elif isinstance(source, (str, Path)):
            path = Path(source)
            paths = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
            text = "\n---\n".join(p.read_text() for p in paths)
        elif all(isinstance(item, (str, Path)) for item in source):
            text = "\n---\n".join(Path(p).read_text() for p in source)
        else:
            text = yaml.safe_dump_all(list(source), sort_keys=False)
        with tempfile.NamedTemporaryFile(
            "w", prefix=f"{name}-", suffix=".yaml", dir=self.workdir, delete=False
        ) as target:
            target.write(fill_time_tokens(text))
        return Path(target.name)

    def render(
        self,
        xr: Path | str | dict,
        composition: Path | str,
        *,
        observed: Path | str | Sequence | None = None,
        required: Path | str | Sequence | None = None,
        xrd: Path | str | None = None,
        timeout: str = "2m",
    ) -> list[dict]:
        """Run `crossplane composition render` and return the rendered documents."""
        command = [
            str(crossplane()),
            "composition",
            "render",
            str(self._materialize("xr", xr)),
            str(composition),
            str(self.functions_file),
            f"--crossplane-binary={crossplane_core()}",
            "--include-function-results",
            "--include-full-xr",
            f"--timeout={timeout}",
        ]
        if observed is not None:
            command.append(f"--observed-resources={self._materialize('observed', observed)}")
        if required is not None:
            command.append(f"--required-resources={self._materialize('required', required)}")
        if xrd is not None:
            command.append(f"--xrd={xrd}")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RenderFailed(command, done.stdout, done.stderr)
        return load_all(done.stdout)


class RenderFailed(RuntimeError):
    def __init__(self, command: list[str], stdout: str, stderr: str) -> None:
        super().__init__(f"{' '.join(command)}\n{stderr}\n{stdout}")
        self.stdout = stdout
        self.stderr = stderr


@contextlib.contextmanager
def running_functions(command: Command = dev_command) -> Iterator[Functions]:
    with tempfile.TemporaryDirectory(prefix="modelplane-render-") as workdir:
        functions = Functions(Path(workdir), command)
        try:
            functions.start()
            yield functions
        finally:
            functions.stop()


# `crossplane resource validate` wants Crossplane's own schemas from this
# image; an empty cached package satisfies it offline, and our resources
# need none of them (XRs are checked against our XRDs, the rest against CRDs).
CROSSPLANE_IMAGE = "xpkg.crossplane.io/crossplane/crossplane:stable"


def validate(
    extensions: Sequence[Path], resources: Sequence[dict] | Path
) -> subprocess.CompletedProcess:
    """Run `crossplane resource validate` offline; returns the finished process.

    Render results (kind Result) are not resources and are left out.
    """
    with tempfile.TemporaryDirectory(prefix="modelplane-validate-") as workdir:
        ext_dir = Path(workdir) / "extensions"
        ext_dir.mkdir()
        for i, path in enumerate(extensions):
            shutil.copy(path, ext_dir / f"{i:03d}-{Path(path).name}")
        cache = Path(workdir) / "cache"
        image_dir = cache / CROSSPLANE_IMAGE.replace(":", "@")
        image_dir.mkdir(parents=True)
        (image_dir / "package.yaml").write_text("")
        if isinstance(resources, Path):
            docs = load_all(fill_time_tokens(resources.read_text()))
        else:
            docs = list(resources)
        resource_path = Path(workdir) / "resources.yaml"
        resource_path.write_text(
            yaml.safe_dump_all([d for d in docs if d.get("kind") != "Result"], sort_keys=False)
        )
        return subprocess.run(
            [
                str(crossplane()),
                "resource",
                "validate",
                str(ext_dir),
                str(resource_path),
                f"--cache-dir={cache}",
                f"--crossplane-image={CROSSPLANE_IMAGE}",
                "--error-on-missing-schemas",
            ],
            capture_output=True,
            text=True,
            check=False,
        )


# The example fleet: every case `make render` shows, and the render tests read.
def example_cases() -> list[dict]:
    return yaml.safe_load((ROOT / "examples" / "renders.yaml").read_text())["cases"]


def render_case(functions: Functions, case: dict) -> list[dict]:
    """Render one case of examples/renders.yaml (paths relative to the repository)."""
    return functions.render(
        ROOT / case["xr"],
        ROOT / case["composition"],
        observed=ROOT / case["observed"] if case.get("observed") else None,
        required=[ROOT / p for p in case.get("required", [])] or None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render the example fleet with the real Crossplane CLI."
    )
    parser.add_argument("cases", nargs="*", help="case names in examples/renders.yaml (all)")
    parser.add_argument("--out", type=Path, default=ROOT / "out", help="where to write renders")
    parser.add_argument(
        "--packages",
        type=Path,
        metavar="DIR",
        help="run the functions from the packages in DIR (`make packages`: dist/xpkg)",
    )
    args = parser.parse_args(argv)
    cases = [c for c in example_cases() if not args.cases or c["name"] in args.cases]
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        command: Command = dev_command
        if args.packages:
            unpacked = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="xpkg-")))
            unpacked.chmod(0o755)
            runtimes = packages.unpack_all(args.packages, unpacked, FUNCTIONS)
            command = packages.packaged_command(runtimes)
        functions = stack.enter_context(running_functions(command))
        for case in cases:
            text = yaml.safe_dump_all(render_case(functions, case), sort_keys=False)
            (args.out / f"{case['name']}.yaml").write_text(text)
            print(f"# ---- {case['name']}: {case.get('description', '')}")
            print(text)
    print(f"# rendered {len(cases)} cases into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
