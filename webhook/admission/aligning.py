"""The review of a ResourceClaim or ResourceClaimTemplate as it is created (`/claims`):
its GPUs paired with its NICs under one PCIe root where policy says so
(`webhook.devices.pairing`).

Why the claim, not the pod: a constraint lives in the claim's spec, which the pod only
names, and the claims a template makes copy the template's spec. The apiserver makes a
pod's claim from its template after the pod is admitted, without asking any webhook
about the pod again, so rewriting the template (or a claim written by hand) as it is
created is the one place the constraint can be added. Claims are immutable afterwards."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from webhook.admission import responses
from webhook.admission.reviews import Request, Response
from webhook.devices.pairing import paired
from webhook.patchops import PatchOp
from webhook.policy.model import Policy

_KINDS = {"ResourceClaim": "/spec/devices", "ResourceClaimTemplate": "/spec/spec/devices"}


def _paired(obj: Any, policy: Policy) -> tuple[str, dict[str, Any] | None, list[str]]:
    """Where the claim's devices are, and them paired (None: unchanged), with warnings."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if kind not in _KINDS:
        return "", None, []
    spec = obj.get("spec")
    if kind == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, Mapping) else None
    devices, warnings = paired(spec, policy.device_kinds.values())
    return _KINDS[kind], devices, warnings


def align(request: Request, policy: Policy, *_: Any) -> Response:
    """Pair the claim's devices; anything else passes unchanged."""
    if request.operation != "CREATE" or request.namespace in policy.excluded_namespaces:
        return responses.allowed()
    path, devices, warnings = _paired(request.object, policy)
    if devices is None:
        return responses.allowed(tuple(warnings))
    patch: list[PatchOp] = [{"op": "replace", "path": path, "value": devices}]
    return Response(True, None, 200, tuple(patch), tuple(warnings))


def as_admitted(obj: Any, policy: Policy) -> Any:
    """A claim or template as the webhook would have it stored (for `airlock explain`,
    which reads files, not the apiserver); anything else as it is."""
    path, devices, _ = _paired(obj, policy)
    if devices is None:
        return obj
    admitted = copy.deepcopy(obj)
    *parents, last = path.strip("/").split("/")
    node = admitted
    for key in parents:
        node = node[key]
    node[last] = devices
    return admitted
