"""What `kubectl airlock why` reads besides the status survey: the pod, or the pods of a
workload (their owners read level by level, as `references.belongs` walks them), and the
namespace's labels; and each pod's facts as `telling` judges them: whether the policy the
cluster runs governs it (the webhook's own classification, or its marks on the pod), its
unit as the controller tracks it, and its state."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.gangs import membership
from webhook.controller.core.identities import PodKey
from webhook.controller.shells.applying import EVENT_SOURCE
from webhook.keys import GATE, RULE_ANNOTATION
from webhook.kuberaw import json_of
from webhook.plugin.reaching import Failure
from webhook.plugin.references import DEPTH, OwnerKey, Reference, belongs, owner_keys
from webhook.plugin.telling import PodFacts
from webhook.pods import PodShapeError, PodView
from webhook.policy.classifying import classify
from webhook.policy.model import Policy


async def pods_of(api: client.ApiClient, namespace: str, ref: Reference
                  ) -> list[dict[str, Any]]:
    """The pod, or the workload's pods; Failure when there is none."""
    core = client.CoreV1Api(api)
    if ref.is_pod:
        try:
            return [await json_of(await core.read_namespaced_pod(
                ref.name, namespace, _preload_content=False))]
        except ApiException as e:
            if e.status == 404:
                raise Failure(f"pod {namespace}/{ref.name} not found") from None
            raise
    listed = await json_of(await core.list_namespaced_pod(namespace, _preload_content=False))
    pods = [(p, PodView.parse(p, namespace)) for p in listed.get("items") or []
            if _readable(p, namespace)]
    owners = await _owners(api, namespace, [v for _, v in pods])
    found = [raw for raw, view in pods if belongs(view, ref, owners)]
    if not found:
        raise Failure(f"found no pods of {ref.shown(namespace)}: it does not exist, or "
                      "has made no pods yet")
    return found


def _readable(raw: Mapping[str, Any], namespace: str) -> bool:
    try:
        PodView.parse(raw, namespace)
    except PodShapeError:
        return False
    return True


async def _owners(api: client.ApiClient, namespace: str, pods: list[PodView]
                  ) -> dict[OwnerKey, tuple[Mapping[str, Any], ...]]:
    """The ownerReferences of every owner above the pods, up to `DEPTH` levels; an owner
    that cannot be read (gone, or not the user's to read) ends its branch."""
    known: dict[OwnerKey, tuple[Mapping[str, Any], ...]] = {}
    level = {k for p in pods for k in owner_keys(p.owners)}
    for _ in range(DEPTH):
        level -= set(known)
        if not level:
            break
        keys = sorted(level)
        found = await asyncio.gather(*(_owner(api, namespace, k) for k in keys))
        known.update(zip(keys, found, strict=True))
        level = {k for refs in found for k in owner_keys(refs)}
    return known


async def _owner(api: client.ApiClient, namespace: str, key: OwnerKey
                 ) -> tuple[Mapping[str, Any], ...]:
    api_version, kind, name = key
    group, _, version = api_version.rpartition("/")
    try:
        if not group:
            raw = await json_of(await client.CoreV1Api(api).read_namespaced_pod(
                name, namespace, _preload_content=False))
        else:
            raw = await json_of(await client.CustomObjectsApi(api).get_namespaced_custom_object(
                group, version, namespace, f"{kind.lower()}s", name, _preload_content=False))
    except ApiException as e:
        if e.status in (403, 404):
            return ()
        raise
    return tuple((raw.get("metadata") or {}).get("ownerReferences") or ())


async def namespace_labels(api: client.ApiClient, namespace: str) -> Mapping[str, str] | None:
    """The namespace's labels (one may take it out of Airlock's scope); None when the
    user may not read namespaces."""
    try:
        found = await json_of(await client.CoreV1Api(api).read_namespace(
            namespace, _preload_content=False))
    except ApiException as e:
        if e.status in (403, 404):
            return None
        raise
    return dict((found.get("metadata") or {}).get("labels") or {})


async def controller_events(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """The controller's latest event on each pod of the namespace, as "Reason: message";
    none when the user may not list events."""
    try:
        listed = await json_of(await client.CoreV1Api(api).list_namespaced_event(
            namespace, field_selector="involvedObject.kind=Pod", _preload_content=False))
    except ApiException as e:
        if e.status == 403:
            return {}
        raise
    ours = [event for event in listed.get("items") or []
            if (event.get("source") or {}).get("component") == EVENT_SOURCE]
    latest: dict[str, str] = {}
    for event in sorted(ours, key=lambda event: event.get("lastTimestamp") or ""):
        latest[str((event.get("involvedObject") or {}).get("name"))] = \
            f"{event.get('reason')}: {event.get('message')}"
    return latest


def facts(raw: Mapping[str, Any], namespace: str, policy: Policy,
          labels: Mapping[str, str] | None, cluster: Tracked,
          told: Mapping[str, str] | None = None) -> PodFacts:
    """A pod as `why` judges it; `told`: the controller's latest event on each pod."""
    view = PodView.parse(raw, namespace)
    decision = classify(view, policy, labels)
    # The webhook's marks say it governed the pod when it was made, whatever the policy
    # (or the claims classification does not read here) says now.
    governed = decision.in_scope or RULE_ANNOTATION in view.annotations
    tracked = cluster.pods.get(PodKey(namespace, view.name))
    unit = membership(tracked) if tracked else None
    shown = None if unit is None else (unit.path if unit.kind == "gang" else str(unit))
    return PodFacts(view.name, governed, decision.reason, shown, _state(raw, decision.held),
                    (told or {}).get(view.name))


def _state(raw: Mapping[str, Any], held: str | None) -> str:
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase in ("Succeeded", "Failed"):
        return f"finished ({phase})"
    if spec.get("nodeName"):
        return f"bound to node {spec['nodeName']} ({phase})"
    if any(g.get("name") == GATE for g in spec.get("schedulingGates") or []):
        return "gated; the controller's dry run names no wait for it"
    if held:
        return f"held by the scheduling gate {held}: that system starts it, not Airlock"
    return "not gated: kube-scheduler places it (see its events)"
