"""Fleet scale on real components: many deployments arriving on a fleet of kwok nodes.

`profile` says what the fleet, its other work and the arrivals are (seeded);
`run` sets them up on a running stack and lets the deployments arrive, with
both accounting arms (Observed histograms, Declared whole-node) side by side;
`record` keeps every change the API servers report; `analysis` turns those
records into figures (its docstring defines each); `cost` measures the control
plane's CPU and bytes per request; `report` prints the table and writes it.
`python -m modelplane_e2e.scale` (`make e2e-scale`) starts its own
stack with several workload clusters; tests/e2e/test_scale.py runs the reduced
profile on the e2e session's stack.
"""
