"""The functions' Prometheus metrics as the demo reads them: each process's /metrics.

Crossplane round-robins a function's calls over its pods (the demo runs one
process per pod, `modelplane_e2e.functions`), so a placement is
counted by whichever process served that pass: only the sum over every
process says what the fleet decided. The counters count passes
(modelplane_common.metrics, "Counting passes, not objects"), so a replica
placed once is counted at least once, more often when a pass on a stale view
placed it again.
"""

from __future__ import annotations

import urllib.request
from collections import Counter
from collections.abc import Iterable

from modelplane_common import metrics
from prometheus_client.parser import text_string_to_metric_families

# The counter's sample: its family's name and the `_total` a counter's sample carries.
PLACEMENTS = next(iter(metrics.PLACEMENTS.describe())).name + "_total"


def scrape(address: str, timeout: float = 10) -> str:
    """The text a metrics endpoint (`host:port`) serves at /metrics."""
    with urllib.request.urlopen(f"http://{address}{metrics.PATH}", timeout=timeout) as response:
        text: str = response.read().decode()
    return text


def placements(texts: Iterable[str]) -> Counter[tuple[str, str]]:
    """`modelplane_placements_total` summed over every scraped text, by (cluster, change)."""
    counted: Counter[tuple[str, str]] = Counter()
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == PLACEMENTS:
                    # Whole passes: the exposition's float of a counter of decisions.
                    counted[(sample.labels["cluster"], sample.labels["change"])] += int(
                        sample.value
                    )
    return counted


# The changes that bring a replica onto a cluster (modelplane_common.metrics.PLACEMENT_CHANGES).
ARRIVALS = ("Placed", "Moved")


def uncounted(counted: Counter[tuple[str, str]], replicas_on: Iterable[str]) -> list[str]:
    """Each cluster holding more replicas (`replicas_on`: each replica's cluster) than
    placements onto it were counted, said in a line. A replica got there by its own
    Placed or Moved decision, counted at least once, so no cluster's count is below its
    replicas."""
    short = []
    for cluster, replicas in sorted(Counter(replicas_on).items()):
        arrived = sum(counted[(cluster, change)] for change in ARRIVALS)
        if arrived < replicas:
            short.append(f"{cluster}: {replicas} replicas, {arrived} counted Placed or Moved")
    return short
