"""The benchmarks: one package per bench, each run as `python -m bench.<name>`; what
several share in `bench.common`; traces in `bench/traces/`. They print figures and assert
nothing; today's figures, with their commands and dates, are in docs/benchmarks.md."""
