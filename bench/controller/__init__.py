"""The gang controller: pure fit and decision time, gates lifted on the real apiserver,
throughput against raw PATCHes, and the sandbox filled at 5,000 nodes.

Run it as `python -m bench.controller`; the goals and today's figures are in
docs/benchmarks.md ("Controller")."""
