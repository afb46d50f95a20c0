"""DRA CEL device matching, shared by the scheduler function and the agent.

Kubernetes DRA selects devices with CEL expressions over one variable,
``device``, with ``device.driver``, ``device.attributes[domain].<id>`` and
``device.capacity[domain].<id>``. This package evaluates them the same way:

* a qualified name ``gpu.nvidia.com/productName`` splits at its first ``/``
  into domain and id; an unqualified name belongs to the device's driver
  domain;
* an unknown domain reads as an empty map, an unknown id inside a domain is an
  evaluation error ("no such key"): the device does not match;
* ``quantity()``/``isQuantity()`` and capacity values are Kubernetes quantities
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``,
  ``sign``, ``asInteger``, ``isInteger``, ``asApproximateFloat``);
* ``semver()``/``isSemver()`` and version attributes are semantic versions
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``,
  ``patch``);
* ``cel.bind(var, init, body)`` is available, as in Kubernetes.

Modules, bottom up: `errors`, `quantity`, `semver` (the value types),
`library` (the function table and CEL operator semantics), `check` (static
checks on the syntax tree), `celenv` (compile), `devices` (evaluate on
devices, match requests to kinds).

The CEL engine is cel-python (``celpy``); design/cel-matching.md says why, and
lists every place where this diverges from Kubernetes.
"""

from modelplane_common.cel.celenv import compile_selector
from modelplane_common.cel.devices import (
    KindMatch,
    cache_info,
    clear_caches,
    device_view,
    match_requests,
    selector_matches,
)
from modelplane_common.cel.errors import SelectorError

__all__ = [
    "KindMatch",
    "SelectorError",
    "cache_info",
    "clear_caches",
    "compile_selector",
    "device_view",
    "match_requests",
    "selector_matches",
]
