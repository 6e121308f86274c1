"""LeaderWorkerSet, whole: its convention, and its kind for explain."""

from webhook.operators.integrations import Integration
from webhook.operators.leaderworkerset.making import EXPANSIONS
from webhook.operators.leaderworkerset.reading import LeaderWorkerSetConvention

INTEGRATION = Integration(conventions=(LeaderWorkerSetConvention(),), expansions=EXPANSIONS)
