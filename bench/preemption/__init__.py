"""Preemption: a round and a plan on a full cluster of 5,000 nodes (pure), and a preemptor
timed to Running on the sandbox.

Run it as `python -m bench.preemption`; the goals and today's figures are in
docs/benchmarks.md ("Preemption")."""
