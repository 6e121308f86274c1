"""Where the object that states a gang's size is, read off one of its pods: named by a
label the pod carries, or among the pod's ownerReferences. A convention with an owner
lookup states which as its `owner` (`OwnerSized.owner`), so each walk is written once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.conventions.base import OwnerAddress, OwnerRefs, SizeUnknown


@dataclass(frozen=True, slots=True)
class LabelledOwner:
    """The owner a label on the pod names: `plural` in `group`/`version`, in the pod's
    namespace (a JobSet, a RayCluster, a PodGroup, a Job)."""

    label: str
    group: str
    version: str
    plural: str

    def __call__(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        name = labels.get(self.label)
        return OwnerAddress(self.group, self.version, self.plural, name) if name else (
            SizeUnknown(f"the pod has no label {self.label}"))


@dataclass(frozen=True, slots=True)
class ReferencedOwner:
    """The owner among the pod's ownerReferences whose kind is one of `plurals`' (kind to
    plural) in `group`, at the version the reference names: one kind may be served at
    several (MPIJob is kubeflow.org/v1 from the training-operator, v2beta1 from the
    mpi-operator)."""

    group: str
    plurals: Mapping[str, str]
    # The operator of such pods, as the message for a pod with no such reference names it.
    operator: str

    def __call__(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        for ref in refs:
            kind, name, api_version = ref.get("kind"), ref.get("name"), ref.get("apiVersion")
            group, _, version = str(api_version).partition("/")
            if isinstance(kind, str) and kind in self.plurals and isinstance(name, str) \
                    and group == self.group and version:
                return OwnerAddress(self.group, version, self.plurals[kind], name)
        return SizeUnknown(f"no {self.operator} owner among the pod's ownerReferences")
