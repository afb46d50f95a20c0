"""The one runtime check the builders' `**fields: Unpack[SomeFields]` needs.

mypy checks the keywords a builder is called with only where it type-checks the
caller, and the tests are not type-checked; a misspelt keyword would then be
dropped silently instead of raising TypeError as a named parameter does.
"""

from __future__ import annotations

from collections.abc import Mapping


def reject_unknown(fields: Mapping[str, object], spec: type) -> None:
    """Raise TypeError for a keyword that is not a field of the TypedDict `spec`."""
    known = spec.__required_keys__ | spec.__optional_keys__  # type: ignore[attr-defined]
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {', '.join(unknown)} (not in {spec.__name__})"
        )
