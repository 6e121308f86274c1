"""KubeRay, whole: its convention, and its kinds for explain."""

from webhook.operators.integrations import Integration
from webhook.operators.kuberay.making import EXPANSIONS
from webhook.operators.kuberay.reading import KubeRayConvention

INTEGRATION = Integration(conventions=(KubeRayConvention(),), expansions=EXPANSIONS)
