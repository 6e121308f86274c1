"""Part of a GPU for pods that ask for it: what the pod asks (its gpu-memory or
gpu-fraction annotation), which offered slice it gets, and what is wrong when it gets none.

Pure, and only for pods that carry an annotation (`asks`): mutation maps the pod with
`mapping`, validation denies with `problem`. A pod asks on top of a request for one whole
`nvidia.com/gpu` in each container that needs the slice; mutation swaps that request for
the smallest slice its class may use that fits, so the pod still schedules as it was
written where the policy offers nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from webhook.keys import CLASS_LABEL, GPU_FRACTION_ANNOTATION, GPU_MEMORY_ANNOTATION, ClassName
from webhook.pods import Container, PodView
from webhook.policy.model import Policy
from webhook.policy.slices import WHOLE_GPU, MigProfile, Slice
from webhook.values import Refused, amount, devices, share


def asks(pod: PodView) -> bool:
    """Whether the pod carries either annotation: the only pods anything here runs for."""
    annotations = pod.annotations
    return GPU_MEMORY_ANNOTATION in annotations or GPU_FRACTION_ANNOTATION in annotations


@dataclass(frozen=True, slots=True)
class Ask:
    key: str
    text: str
    # Bytes of GPU memory, or the share of a GPU.
    amount: Fraction

    def fits(self, offer: Slice) -> bool:
        if self.key == GPU_MEMORY_ANNOTATION:
            return offer.memory_bytes >= self.amount
        return offer.share >= self.amount


def read_ask(pod: PodView) -> Ask | str:
    """What the pod asks for, or why it cannot be read (a message naming the annotation)."""
    annotations = pod.annotations
    if GPU_MEMORY_ANNOTATION in annotations and GPU_FRACTION_ANNOTATION in annotations:
        return (f"set {GPU_MEMORY_ANNOTATION} or {GPU_FRACTION_ANNOTATION}, not both: each "
                f"alone says how much of a GPU the pod needs")
    if GPU_MEMORY_ANNOTATION in annotations:
        text = annotations[GPU_MEMORY_ANNOTATION]
        memory = amount(GPU_MEMORY_ANNOTATION, text)
        if isinstance(memory, Refused):
            return memory.message
        return Ask(GPU_MEMORY_ANNOTATION, text, Fraction(memory))
    text = annotations[GPU_FRACTION_ANNOTATION]
    found = share(GPU_FRACTION_ANNOTATION, text)
    if isinstance(found, Refused):
        return found.message
    return Ask(GPU_FRACTION_ANNOTATION, text, found)


def describe(offer: Slice) -> str:
    return f"{offer.resource} ({offer.memory}, {offer.share} of a GPU)"


def _whole_gpus(c: Container) -> int | None:
    """Whole GPUs the container asks for (its limit, else its request); None when it asks
    for none, or says it so that validation's accelerator check names the problem."""
    q = c.limits.get(WHOLE_GPU, c.requests.get(WHOLE_GPU))
    if q is None:
        return None
    n = devices(WHOLE_GPU, q)
    return n if isinstance(n, int) and n > 0 else None


Place = tuple[str, int, Container]


def _asking_for_gpus(pod: PodView) -> Iterator[tuple[Place, int]]:
    for field, containers in (("initContainers", pod.init_containers),
                              ("containers", pod.containers)):
        for index, c in enumerate(containers):
            n = _whole_gpus(c)
            if n is not None:
                yield (field, index, c), n


def offers_for(policy: Policy, class_: ClassName, ask: Ask) -> list[Slice]:
    """The slices the class may use, smallest first in what the pod asks for (memory or
    share); MIG before sharing at the same size, for its isolation."""
    by_memory = ask.key == GPU_MEMORY_ANNOTATION
    return sorted((s for s in policy.slices if class_ in s.classes),
                  key=lambda s: (s.memory_bytes if by_memory else s.share,
                                 not isinstance(s, MigProfile),
                                 s.share if by_memory else s.memory_bytes, s.resource))


@dataclass(frozen=True, slots=True)
class Mapping:
    """The slice the pod gets, and the containers whose one whole GPU becomes it (none
    when the pod already requests it: mutation ran before)."""

    offer: Slice
    containers: tuple[Place, ...]
    ask: Ask

    def resources(self, before: frozenset[str]) -> frozenset[str]:
        """The resources the pod requests once mapped."""
        if not self.containers:
            return before
        return before.difference((WHOLE_GPU,)).union((self.offer.resource,))

    def note(self) -> str:
        names = ", ".join(c.name for _, _, c in self.containers)
        # Warnings are cut at 120 characters: the slice first, then what it replaced.
        return (f"{self.ask.key} {self.ask.text}: {self.offer.resource} ({self.offer.share} "
                f"GPU) for container {names}, not a whole GPU")


def mapping(pod: PodView, class_: ClassName | None, policy: Policy) -> Mapping | None:
    """The slice for a pod that `asks`, or None when it gets none: it asks for nothing
    readable, for more than one whole GPU, or nothing fits (`problem` says which)."""
    ask = read_ask(pod)
    if isinstance(ask, str) or class_ is None:
        return None
    whole: list[Place] = []
    for place, n in _asking_for_gpus(pod):
        if n != 1:
            return None
        whole.append(place)
    if not whole:
        in_use = next((s for s in policy.slices if s.resource in pod.resources), None)
        return None if in_use is None else Mapping(in_use, (), ask)
    chosen = next((s for s in offers_for(policy, class_, ask) if ask.fits(s)), None)
    return None if chosen is None else Mapping(chosen, tuple(whole), ask)


def _nothing_fits(ask: Ask, class_: ClassName, offers: Sequence[Slice]) -> str:
    if not offers:
        return (f"{ask.key}: the policy offers no GPU slice to class {class_}; ask for a "
                f"whole {WHOLE_GPU} (remove the annotation) or see docs/fractional-gpus.md")
    largest = offers[-1]
    return (f"{ask.key}: no GPU slice class {class_} may use has {ask.text}; the largest is "
            f"{describe(largest)}. Ask for less, or for a whole {WHOLE_GPU} (remove the "
            f"annotation)")


def problem(pod: PodView, class_: ClassName | None, policy: Policy) -> str | None:
    """Why a pod that `asks` may not run as it stands, naming the annotation; None when it
    got its slice (or keeps a whole GPU because mutation did not run although one fits)."""
    ask = read_ask(pod)
    if isinstance(ask, str):
        return ask
    whole = False
    for (_, _, c), n in _asking_for_gpus(pod):
        if n != 1:
            return (f"{ask.key} asks for part of one GPU, but container {c.name} requests "
                    f"{n} {WHOLE_GPU}; remove the annotation or request one GPU")
        whole = True
    if not whole:
        if any(s.resource in pod.resources for s in policy.slices):
            return None
        return (f"{ask.key}: no container requests {WHOLE_GPU}; set "
                f"resources.limits.{WHOLE_GPU}: 1 on the container that needs the slice")
    if class_ is None:
        return (f"{ask.key}: no policy rule classified this pod, and GPU slices are offered "
                f"by class; set the {CLASS_LABEL} label")
    offers = offers_for(policy, class_, ask)
    if not any(ask.fits(s) for s in offers):
        return _nothing_fits(ask, class_, offers)
    return None
