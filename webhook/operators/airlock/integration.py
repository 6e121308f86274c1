"""Airlock's own gangs, whole: the convention; no objects of its own, so nothing to make."""

from webhook.operators.airlock.reading import AirlockConvention
from webhook.operators.integrations import Integration

INTEGRATION = Integration(conventions=(AirlockConvention(),))
