"""The soak: the controller SIGKILLed at seeded random moments while it preempts and
reclaims (`driving`), and its invariants checked against what the apiserver said
(`checking`).

Run it as `python -m bench.soak`; today's figures are in docs/benchmarks.md ("Soak")."""
