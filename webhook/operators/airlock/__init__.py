"""Airlock's own convention: `gpu-airlock.io/gang-name` and `gang-size`."""
