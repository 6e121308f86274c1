"""The storm's workloads and what Airlock's marks on their pods say.

Half the pods are inference replicas (Deployments of a vLLM image, 1 GPU each: Airlock
classifies them `inference`, ungated); half are training gangs (indexed Jobs of 8-GPU
pods carrying Airlock's gang label and size: `training`, held behind the gang gate, which
nothing lifts here since no gang controller runs). Many objects are created at once: the
ReplicaSet and Job controllers create each object's pods in slow-start batches (1, 2, 4,
...), so one large object would be created at a trickle, while several are worked on by
the controllers' concurrent syncs (5 of each by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.common import deployment, job, pod_template
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION, GATE

SERVING_IMAGE = "vllm/vllm-openai:v0.6.3"
TRAINING_IMAGE = "ghcr.io/acme/trainer:1.0"


def split(total: int, size: int) -> list[int]:
    """`total` pods in objects of `size` pods, the last one smaller if need be."""
    return [size] * (total // size) + ([total % size] if total % size else [])


def serving(name: str, ns: str, replicas: int) -> dict[str, Any]:
    return deployment(name, ns, replicas, pod_template(name, image=SERVING_IMAGE, gpus=1))


def training(name: str, ns: str, pods: int, gated: bool = False) -> dict[str, Any]:
    """An indexed Job whose pods are one gang of `pods` members, named by Airlock's own
    convention; `gated`, they carry the gang gate from their template, as Airlock would
    leave them (so the scheduler has the same work without Airlock)."""
    pod = pod_template(name, image=TRAINING_IMAGE, gpus=8)
    pod["metadata"]["labels"][GANG_NAME_LABEL] = name
    pod["metadata"]["annotations"] = {GANG_SIZE_ANNOTATION: str(pods)}
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
    out = job(name, ns, pods, pod)
    out["spec"]["completionMode"] = "Indexed"
    return out


def storm(ns: str, pods: int, replicas: int, gang_size: int, gated: bool = False
          ) -> list[dict[str, Any]]:
    """Deployments of `replicas` for half the pods, indexed Jobs of `gang_size` for the
    other half (`gated`: see `training`), interleaved."""
    serving_pods = pods // 2
    serve = [serving(f"serve-{i}", ns, n) for i, n in enumerate(split(serving_pods, replicas))]
    train = [training(f"train-{i}", ns, n, gated)
             for i, n in enumerate(split(pods - serving_pods, gang_size))]
    return sorted([*serve, *train], key=_share(serve, train))


def _share(*kinds: list[dict[str, Any]]) -> Any:
    """Interleaves the kinds, each object at its place in its own list as a share of that
    list: sent at a rate, both kinds arrive throughout the storm."""
    place = {id(obj): i / len(objs) for objs in kinds for i, obj in enumerate(objs)}
    return lambda obj: place[id(obj)]


def pods_of(obj: dict[str, Any]) -> int:
    spec = obj["spec"]
    return int(spec.get("replicas") or spec.get("parallelism") or 1)


@dataclass(frozen=True, slots=True)
class Marks:
    """A stored GPU pod as Airlock's mutation left it."""

    classed: bool  # the class label
    gated: bool  # the gang gate
    in_gang: bool  # it asked for a gang (so marked means gated too)

    @staticmethod
    def of(pod: dict[str, Any]) -> Marks:
        labels = pod["metadata"].get("labels") or {}
        gates = pod["spec"].get("schedulingGates") or []
        return Marks(CLASS_LABEL in labels, any(g["name"] == GATE for g in gates),
                     GANG_NAME_LABEL in labels)

    @property
    def state(self) -> str:
        """`marked` (all Airlock writes), `unmarked` (none: the webhook was not asked, or
        failed open) or `partial` (anything else, which no failure policy explains)."""
        if self.classed and self.gated == self.in_gang:
            return "marked"
        if not self.classed and not self.gated:
            return "unmarked"
        return "partial"
