"""Fuzz: the real webhook process fed 100,000 reviews drawn by hypothesis from the test
strategies (`tests/strategies.py`), under the shipped policy and generated ones; with
`--controller`, the controller, through the sandbox, under a tenant's hostile objects
(`tests/hostile.py`) while another team's gang must still be admitted.

Run it as `python -m bench.fuzz`; the goal and today's figures are in docs/benchmarks.md
("Fuzz")."""
