"""Whether a command asks the apiserver by default: the one rule for every option that
reads the cluster (`--metrics-auth`, `--dra`), so they never disagree about where an
apiserver is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

Mode = Literal["kubernetes", "none"]
MODES: tuple[Mode, ...] = get_args(Mode)


def resolve(given: Mode | None, kubeconfig: Path | None) -> Mode:
    """The mode asked for; by default `kubernetes` wherever there is an apiserver to ask
    (in a pod, or given a kubeconfig), and `none` elsewhere, so the commands still run on
    a laptop with no cluster."""
    if given is not None:
        return given
    if kubeconfig is not None:
        return "kubernetes"
    from webhook.kubeclient import in_cluster

    return "kubernetes" if in_cluster() else "none"


class NoCredentials(Exception):
    """An option asks the apiserver, and no credentials could be loaded to do it."""


async def credentials(kubeconfig: Path | None, needs: str, otherwise: str) -> Any:
    """A client configuration from `kubeconfig`, else the pod's service account, else
    ~/.kube/config; NoCredentials saying what `needs` them and which option does
    without (`otherwise`). The Kubernetes client is imported only here: the admission
    server needs it for nothing else."""
    from webhook import kubeclient

    try:
        return await kubeclient.load_configuration(kubeconfig)
    except Exception as e:  # the loaders raise their own kinds, and OSError
        raise NoCredentials(
            f"{needs}, and no credentials could be loaded ({e}); pass --kubeconfig, run in "
            f"a pod with its service account token, or choose {otherwise}") from e
