"""The controller's shells: watches, the applier, leader election, events, metrics and
the commands, around the pure core (docs/architecture.md)."""
