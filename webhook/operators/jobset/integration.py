"""JobSet, whole: its convention, and its kind for explain."""

from webhook.operators.integrations import Integration
from webhook.operators.jobset.making import EXPANSIONS
from webhook.operators.jobset.reading import JobSetConvention

INTEGRATION = Integration(conventions=(JobSetConvention(),), expansions=EXPANSIONS)
