"""Airlock against the alternatives: one trace on the sandbox under the stock scheduler,
coscheduling, Kueue and Airlock. `manifests`: what each system's user writes for a job;
`peers`: the peer schedulers, built from their Go modules; `replaying` runs a system,
`recording` reads what happened to each job, `reporting` writes the table.

Run it as `python -m bench.peers`; today's figures are in docs/benchmarks.md ("Against
the alternatives") and the findings in docs/alternatives.md."""
