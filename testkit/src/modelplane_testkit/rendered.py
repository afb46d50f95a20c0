"""Small readers for what `crossplane composition render` printed."""

from __future__ import annotations

from modelplane_common.inputs import condition_in


def by_kind(rendered: list[dict], kind: str) -> list[dict]:
    return [d for d in rendered if d.get("kind") == kind]


def composite(rendered: list[dict]) -> dict:
    """The XR a render prints first."""
    return rendered[0]


def condition(xr: dict, type_: str) -> dict:
    found = condition_in(xr.get("status", {}).get("conditions", []), type_)
    if found:
        return dict(found)
    raise AssertionError(f"no {type_} condition in {xr.get('status', {}).get('conditions')}")


def results(rendered: list[dict]) -> list[dict]:
    """Function results (events) a render printed as kind Result."""
    return by_kind(rendered, "Result")
