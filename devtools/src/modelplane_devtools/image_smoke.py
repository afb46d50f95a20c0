"""Run inside an image, by the image's own Python: what loads, and whether its bytecode is its own.

tests/packages/test_arm64_images.py binds this file into an arm64 image's
sandbox and runs it with /venv/bin/python under qemu-user, so every check is
made by the interpreter and libraries of that image, on that architecture:

- the module of the console script named first (the image's entrypoint)
  imports, and has the function the script calls;
- every extension module of the venv's site-packages and of the standard
  library's lib-dynload imports: each native wheel uv picked for the
  platform, and each of the base's shared libraries they load;
- each source file named on the command line compiles to exactly the bytes
  of the bytecode shipped beside it (same invalidation mode, same recorded
  file name): the build compiled that bytecode with the amd64 interpreter.

It prints one JSON object and uses only the standard library (the image has
nothing else outside /venv). Usage: image_smoke.py SCRIPT [SOURCE.py ...]
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import platform
import py_compile
import sys
import sysconfig
import tempfile
from pathlib import Path

# The machine-tagged suffixes: a bare `.so` is as often a bundled library as a module.
_TAGGED = [s for s in importlib.machinery.EXTENSION_SUFFIXES if s != ".so"]
# Bytecode header flags (PEP 552): bit 0 hash-based, bit 1 check the source.
_MODES = {
    0b00: py_compile.PycInvalidationMode.TIMESTAMP,
    0b01: py_compile.PycInvalidationMode.UNCHECKED_HASH,
    0b11: py_compile.PycInvalidationMode.CHECKED_HASH,
}


def extension_modules(directory: Path) -> list[str]:
    """Dotted names of the machine-tagged extension modules under a directory on sys.path."""
    names = []
    for path in sorted(directory.rglob("*.so")):
        suffix = next((s for s in _TAGGED if path.name.endswith(s)), None)
        if suffix is not None:
            relative = path.relative_to(directory)
            parts = [*relative.parts[:-1], path.name.removesuffix(suffix)]
            names.append(".".join(parts))
    return names


def entrypoint(script: str) -> tuple[str, str]:
    """The module and attribute of a console script, from the installed metadata."""
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name=script)
    return entry.module, entry.attr


def import_all(names: list[str]) -> dict[str, str]:
    """Each name that failed to import, with its error."""
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # any failure is the finding, reported one line each
            failed[name] = f"{type(error).__name__}: {error}"
    return failed


def recompiles_identically(source: str, scratch: Path) -> bool:
    shipped = Path(importlib.util.cache_from_source(source)).read_bytes()
    flags = int.from_bytes(shipped[4:8], "little")
    out = scratch / "recompiled.pyc"
    py_compile.compile(
        source, cfile=str(out), dfile=source, doraise=True, invalidation_mode=_MODES[flags]
    )
    return out.read_bytes() == shipped


def main(script: str, sources: list[str]) -> dict:
    site = Path(sysconfig.get_paths()["purelib"])
    dynload = Path(sysconfig.get_paths()["stdlib"]) / "lib-dynload"
    extensions = extension_modules(site) + extension_modules(dynload)
    module, attr = entrypoint(script)
    failed = import_all([module, *extensions])
    if module not in failed and not callable(getattr(sys.modules[module], attr, None)):
        failed[module] = f"no callable {attr}"
    with tempfile.TemporaryDirectory() as scratch:
        bytecode = {source: recompiles_identically(source, Path(scratch)) for source in sources}
    return {
        "machine": platform.machine(),
        "prefix": sys.prefix,
        "entrypoint_module": module,
        "extension_modules": extensions,
        "failed": failed,
        "bytecode_identical": bytecode,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:]), sort_keys=True))
