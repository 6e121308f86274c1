"""Kubernetes itself, whole: its two gang conventions, and the built-in kinds for explain.
The indexed Job's convention takes the registry's place of this integration; the
PodGroup's, found in the pod's spec and not by a label, is asked after every label
convention wherever it is listed."""

from webhook.operators.integrations import Integration
from webhook.operators.kubernetes.making import EXPANSIONS
from webhook.operators.kubernetes.reading import IndexedJobConvention, SchedulingGroupConvention

INTEGRATION = Integration(conventions=(IndexedJobConvention(), SchedulingGroupConvention()),
                          expansions=EXPANSIONS)
