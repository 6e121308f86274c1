"""The controller's pure core: the tracked cluster, one round of decisions, the records it
keeps. No I/O: the clock and the cluster come in as arguments (docs/architecture.md)."""
