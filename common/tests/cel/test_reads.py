"""Which entries of `device` a selector reads, and that projecting onto them changes nothing."""

from __future__ import annotations

import itertools

import pytest
from modelplane_common.cel.devices import all_selectors_match, device_view
from modelplane_common.cel.errors import SelectorError
from modelplane_common.cel.reads import device_reads, project

NV = "gpu.nvidia.com"

READS = {
    "the driver alone reads no entry": ('device.driver == "gpu.nvidia.com"', frozenset()),
    "a dotted attribute path is read": (
        f'device.attributes["{NV}"].type == "gpu"',
        frozenset({("attributes", NV, "type")}),
    ),
    "an indexed attribute path is read": (
        f'device.attributes["{NV}"]["type"] == "gpu"',
        frozenset({("attributes", NV, "type")}),
    ),
    "has() of a path reads it": (
        f'has(device.attributes["{NV}"].mig)',
        frozenset({("attributes", NV, "mig")}),
    ),
    "capacity paths are read with their method calls": (
        f'device.capacity["{NV}"].memory.isGreaterThan(quantity("40Gi"))',
        frozenset({("capacity", NV, "memory")}),
    ),
    "every path of a conjunction is read": (
        f'device.attributes["{NV}"].a == 1 && device.attributes["x.io"].b',
        frozenset({("attributes", NV, "a"), ("attributes", "x.io", "b")}),
    ),
    "a whole domain map cannot be told": (f'device.attributes["{NV}"].size() > 2', None),
    "a computed domain cannot be told": ('device.attributes["gpu." + "nvidia.com"].a', None),
    "the attributes map itself cannot be told": ('"x" in device.attributes', None),
    "device passed whole cannot be told": ("[device].size() == 1", None),
    "a macro rebinding device cannot be told": (
        "[1].all(device, device > 0) && device.driver == 'x'",
        None,
    ),
    "a string with escapes cannot be told": (r'device.attributes["a\"b"].c', None),
    "an expression that does not parse cannot be told": ("device.attributes[", None),
}


@pytest.mark.parametrize(("expression", "reads"), list(READS.values()), ids=list(READS))
def test_device_reads(expression, reads):
    assert device_reads(expression) == reads


def gpu(uuid: str, product: str, memory: str, mig: bool | None) -> dict:
    attributes: dict = {
        "uuid": {"string": uuid},
        f"{NV}/productName": {"string": product},
        "type": {"string": "gpu"},
    }
    if mig is not None:
        attributes["mig"] = {"bool": mig}
    return {"driver": NV, "attributes": attributes, "capacity": {"memory": {"value": memory}}}


DEVICES = [
    gpu(f"u{i}", product, memory, mig)
    for i, (product, memory, mig) in enumerate(
        itertools.product(["A100", "H100"], ["40Gi", "80Gi"], [True, False, None])
    )
]
EXPRESSIONS = [
    f'device.attributes["{NV}"].productName == "H100"',
    f'device.attributes["{NV}"].mig',
    f'has(device.attributes["{NV}"].mig) && !device.attributes["{NV}"].mig',
    f'device.capacity["{NV}"].memory.compareTo(quantity("50Gi")) > 0',
    f'device.driver == "{NV}" && device.attributes["{NV}"].type == "gpu"',
]


def outcome(expression: str, view) -> object:
    try:
        return all_selectors_match((expression,), view)
    except SelectorError:
        return "error"


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_projected_view_evaluates_like_the_whole_device(expression):
    reads = device_reads(expression)
    assert reads is not None
    for device in DEVICES:
        view = device_view(device)
        assert outcome(expression, project(view, reads)) == outcome(expression, view)


def test_devices_differing_only_in_unread_attributes_share_one_projection():
    reads = device_reads(EXPRESSIONS[0])
    assert reads is not None
    projections = {project(device_view(d), reads) for d in DEVICES}
    assert len(projections) == 2  # A100 and H100; uuids, memory and mig are not read
