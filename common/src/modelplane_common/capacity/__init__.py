"""The capacity model the scheduler and admission share.

    fleet.py        pools, clusters, placed engines and charges (the types)
    readers.py      InferenceCluster and ModelReplica wire forms into those types
    fit.py          a pool's free capacity: PoolLedger, and Ledger (node classes)
    devicecount.py  DeviceCountLedger: an unobserved pool counted by its devices
    pools.py        a pool's ledger from its status and fallback; charging replicas;
                    PoolLedgers, the per-pass cache of every pool's ledger
    charge_label.py which replicas a reader must read (the modelplane.ai/charge label)
    diagnosis.py    why a pool refused an engine, counted per cause

One home for each rule: compose-model-deployment places new replicas on
these ledgers and compose-model-replica admits a replica on them, so the
two can never disagree on what fits.
"""
