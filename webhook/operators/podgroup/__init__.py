"""The coscheduling plugin's PodGroup (scheduler-plugins)."""
