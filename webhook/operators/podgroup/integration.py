"""The coscheduling plugin's PodGroup, whole: the convention; a PodGroup makes no pods."""

from webhook.operators.integrations import Integration
from webhook.operators.podgroup.reading import PodGroupConvention

INTEGRATION = Integration(conventions=(PodGroupConvention(),))
