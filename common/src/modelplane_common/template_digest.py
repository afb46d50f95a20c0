"""A member's pod template by reference: the digest a ModelReplica carries instead of it.

compose-model-deployment validates each member's template
(`modelplane_common.pod_template`) and writes, on every ModelReplica it
composes, `templateDigest` for the member instead of the template itself;
compose-model-replica fetches the ModelDeployment and renders a member's
template from it only when the template there has the same digest. So a
replica is small on the wire (its template is most of it: design/scheduler.md,
"Control-plane cost and Crossplane's message limits"), and the template a
replica renders is always one the deployment function validated: a tenant
may edit the ModelDeployment, never the ModelReplica (design/tenancy.md,
"Templates by digest").

The rule, applied by both functions through `of` and nowhere else
    `sha256:` and the lowercase hex SHA-256 of the template's canonical JSON:
    UTF-8, keys sorted, no whitespace (`,` and `:` separators), non-ASCII
    characters as themselves, and every whole number written as an integer.
    The last makes the digest independent of how the template was read: the
    protobuf Struct a function receives has one number type, so a `120` the
    tenant wrote arrives as `120.0` (`inputs.integral_object` states the
    range). Two templates have the same digest exactly when they are the same
    JSON value, whatever the order of their keys.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from modelplane_common.inputs import integral_object

PREFIX = "sha256:"
PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")  # the XRD's pattern for templateDigest


def canonical(template: Mapping) -> bytes:
    """The template's canonical JSON, the bytes its digest is of."""
    return json.dumps(
        integral_object(template),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode("utf-8")


def of(template: Mapping) -> str:
    """The digest of a pod template: `sha256:<hex>` of its canonical JSON."""
    return PREFIX + hashlib.sha256(canonical(template)).hexdigest()
