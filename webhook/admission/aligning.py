"""The review of a ResourceClaim or ResourceClaimTemplate as it is created (`/claims`):
its GPUs paired with its NICs under one PCIe root where policy says so
(`webhook.devices.pairing`).

Why the claim, not the pod: a constraint lives in the claim's spec, which the pod only
names, and the claims a template makes copy the template's spec. The apiserver makes a
pod's claim from its template after the pod is admitted, without asking any webhook
about the pod again, so rewriting the template (or a claim written by hand) as it is
created is the one place the constraint can be added. Claims are immutable afterwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.admission import responses
from webhook.admission.reviews import Request, Response
from webhook.devices.pairing import paired
from webhook.patchops import PatchOp
from webhook.policy.model import Policy

_KINDS = {"ResourceClaim": "/spec/devices", "ResourceClaimTemplate": "/spec/spec/devices"}


def align(request: Request, policy: Policy, *_: Any) -> Response:
    """Pair the claim's devices; anything else passes unchanged."""
    obj = request.object
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if request.operation != "CREATE" or kind not in _KINDS \
            or request.namespace in policy.excluded_namespaces:
        return responses.allowed()
    spec = obj.get("spec")
    if kind == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, Mapping) else None
    devices, warnings = paired(spec, policy.device_kinds.values())
    if devices is None:
        return responses.allowed(tuple(warnings))
    patch: list[PatchOp] = [{"op": "replace", "path": _KINDS[kind], "value": devices}]
    return Response(True, None, 200, tuple(patch), tuple(warnings))
