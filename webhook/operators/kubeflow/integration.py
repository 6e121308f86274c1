"""The Kubeflow training-operator and MPIJob, whole: their convention, and their kinds for
explain."""

from webhook.operators.integrations import Integration
from webhook.operators.kubeflow.making import EXPANSIONS
from webhook.operators.kubeflow.reading import KubeflowConvention

INTEGRATION = Integration(conventions=(KubeflowConvention(),), expansions=EXPANSIONS)
