"""modelplane-sim: what each way of counting capacity costs a fleet, measured on the real core.

The same arrivals of ModelDeployments are replayed once per accounting
policy (policies.py). Each run (world.py) plans every deployment with the
function's own `placement.plan`, on the InferenceClusters the policy
implies read by the function's own reader; only the workload cluster is
modelled: binder.py binds pods to nodes (spread, pack or random), so the
difference between what the core believed and what fits is measured, not
assumed. The upper bound (bound.py) is a relaxed optimum no policy can beat.

    fleet.py     the fleet file or `kubectl get inferenceclusters -o yaml`
    arrivals.py  the arrival model (YAML) or a CSV of arrivals
    summary.py   one row per policy: the metrics, defined once
    report.py    PNG plots and report.html
    run.py       one simulation: every policy's world on the same steps, and the bound
    cli.py       the command: reads the inputs, prints the table, writes the report

Time is simulated (an input to every step) and every random choice is
drawn from a seeded generator: the same inputs give the same report.
"""
