"""The storm: thousands of GPU pods made at once by the real kube-controller-manager from
Deployments and Jobs (`workloads`), through a real apiserver with Airlock's webhook wired
in (`storming`); the webhook's latency and errors as the apiserver counts them
(`figures`), and what the failure policy promises when the webhook is SIGKILLed in the
middle (`checking`).

Run it as `python -m bench.storm`; the goals and today's figures are in
docs/benchmarks.md ("Storm")."""
