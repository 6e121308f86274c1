"""Admission as the apiserver sees it: the real control plane with the webhook wired in,
timed by the apiserver's own webhook-latency histogram.

Run it as `python -m bench.apiserver`; the goals and today's figures are in
docs/benchmarks.md ("Admission, from the apiserver")."""
