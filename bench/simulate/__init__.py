"""`airlock simulate` at scale: 10,000 jobs over a day on 5,000 nodes of 8 GPUs.

Run it as `python -m bench.simulate`; the goals and today's figures are in
docs/benchmarks.md ("Simulation")."""
