"""Admission: the webhook next to a bare aiohttp + orjson endpoint (`echo_server`), same
TLS and the same realistic AdmissionReview bodies (`bodies`), under wrk or callgrind.

Run it as `python -m bench.admission`; the goals and today's figures are in
docs/benchmarks.md ("Admission")."""
