"""Kueue's plain pod groups, whole: the convention; their pods are people's own, so nothing
to make."""

from webhook.operators.integrations import Integration
from webhook.operators.kueue.reading import KueueConvention

INTEGRATION = Integration(conventions=(KueueConvention(),))
