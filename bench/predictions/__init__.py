"""What the error of predicted starts is made of: `airlock simulate --predictions` on a
trace as written, and again with its run times told to the forecast exactly.

Run it as `python -m bench.predictions`; today's figures are in docs/benchmarks.md
("Predicted starts")."""
