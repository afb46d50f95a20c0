"""Semantic versions as CEL values (``semver()``, version attributes)."""

from __future__ import annotations

import re

from modelplane_common.cel.errors import CelValueError

_NUM = r"(0|[1-9]\d*)"
_IDENTS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_SEMVER_RE = re.compile(rf"{_NUM}\.{_NUM}\.{_NUM}(?:-({_IDENTS}))?(?:\+({_IDENTS}))?")


class Semver:
    """A strict semantic version (semver.org 2.0.0), as Kubernetes' blang/semver parses it."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(
        self, major: int, minor: int, patch: int, pre: tuple[str | int, ...], build: str
    ) -> None:
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        if not isinstance(text, str):
            raise CelValueError(f"semver needs a string, got {text!r}")
        source = text
        if normalize:
            text = _normalize_semver(text)
        match = _SEMVER_RE.fullmatch(text)
        if match is None:
            raise CelValueError(f"invalid semantic version {source!r}")
        major, minor, patch, pre, build = match.groups()
        identifiers: list[str | int] = []
        for part in pre.split(".") if pre else ():
            if part.isdigit():
                if len(part) > 1 and part.startswith("0"):
                    raise CelValueError(
                        f"invalid semantic version {source!r}: "
                        f"numeric prerelease {part!r} has a leading zero"
                    )
                identifiers.append(int(part))
            else:
                identifiers.append(part)
        return cls(int(major), int(minor), int(patch), tuple(identifiers), build or "")

    def _key(self) -> tuple:
        # A release sorts after all its prereleases; numeric identifiers sort before
        # alphanumeric ones; a shorter prerelease sorts first when it is a prefix.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def cmp(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("semver", self._key()))

    def __repr__(self) -> str:
        pre = "-" + ".".join(map(str, self.pre)) if self.pre else ""
        build = "+" + self.build if self.build else ""
        return f"Semver({self.major}.{self.minor}.{self.patch}{pre}{build})"


def _normalize_semver(text: str) -> str:
    """Kubernetes' semver(s, true): drop a leading v, leading zeros, fill in .0 parts."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise CelValueError(f"short version {text!r} cannot carry prerelease or build data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)
