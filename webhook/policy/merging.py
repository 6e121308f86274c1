"""Several policy documents into one Policy, in a defined order.

Files are taken in name order (prefix them `00-`, `10-`, ...) and documents in file
order. Lists (rules, namespaceAccess, gpuModels, queues, gpuSlices) concatenate in that order, so an
earlier file's rule wins. Sets (excluded namespaces, schedulers, accelerators, gate
removers) are unions with the built-in ones. Maps (classes, topology levels), names
(rules, GPU models, queues, metadata.name, a GPU slice's resource) and settings (fairShare,
preemption) may be defined once: a second definition is a conflict that names both
places.
"""

from __future__ import annotations

from pydantic import ValidationError

from webhook.keys import ClassName
from webhook.policy.capacity import CapacitySpec
from webhook.policy.classes import preemption_problems
from webhook.policy.devices import DeviceClassMapping, device_class_problems
from webhook.policy.gpumodels import GpuModel, model_problems
from webhook.policy.grants import grant_problems
from webhook.policy.model import (
    ClassSpec,
    Grant,
    NamespaceAccess,
    Policy,
    PolicyFile,
    Rule,
    dangling_references,
    missing_classes,
)
from webhook.policy.queues import (
    FairShareSpec,
    PreemptionSpec,
    Queue,
    model_quota_problems,
    queue_problems,
)
from webhook.policy.slices import Slice
from webhook.policy.sources import Document, Loc, PolicyError, Problem


def _validation_problems(doc: Document, error: ValidationError) -> list[Problem]:
    problems = []
    for e in error.errors():
        loc: Loc = tuple(e["loc"])
        where = ".".join(str(p) for p in loc) or "document"
        message = e["msg"]
        if e["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see docs/policy-reference.md)"
        elif not isinstance(e["input"], dict | list):
            message += f", got {e['input']!r}"
        problems.append(Problem(doc.file, doc.line(loc), f"{where}: {message}"))
    return problems


def _parse(doc: Document) -> PolicyFile:
    if not isinstance(doc.data, dict):
        raise PolicyError([Problem(doc.file, doc.start_line,
                                   "a policy document must be a mapping")])
    try:
        return PolicyFile.model_validate(doc.data)
    except ValidationError as e:
        raise PolicyError(_validation_problems(doc, e)) from None


class _Merger:
    def __init__(self) -> None:
        defaults = Policy.model_fields
        self.excluded: set[str] = set(defaults["excluded_namespaces"].default)
        self.schedulers: set[str] = set(defaults["schedulers"].default)
        self.accelerators: dict[str, None] = dict.fromkeys(defaults["accelerators"].default)
        self.gate_removers: set[str] = set(defaults["gate_removers"].default)
        self.classes: dict[ClassName, tuple[ClassSpec, Document]] = {}
        self.levels: dict[str, str] = {}
        self.rules: list[tuple[Rule, Document, int]] = []
        self.access: list[NamespaceAccess] = []
        self.grants: list[tuple[Grant, Document, int]] = []
        self.queues: list[tuple[Queue, Document, int]] = []
        self.models: list[tuple[GpuModel, Document, int]] = []
        self.fair_share: FairShareSpec | None = None
        self.preemption: PreemptionSpec | None = None
        self.capacity: CapacitySpec | None = None
        self.slices: list[Slice] = []
        self.device_classes: list[tuple[DeviceClassMapping, Document, int]] = []
        self.default_class: ClassName | None = None
        self.problems: list[Problem] = []
        # Where each once-only name was defined, for conflict messages.
        self.seen: dict[tuple[str, str], str] = {}

    def _once(self, kind: str, name: str, doc: Document, loc: Loc) -> bool:
        here = doc.where(loc)
        first = self.seen.setdefault((kind, name), here)
        if first != here:
            self.problems.append(Problem(doc.file, doc.line(loc),
                                         f"{kind} {name!r} is already defined at {first}"))
            return False
        return True

    def add(self, doc: Document, pf: PolicyFile) -> None:
        self._once("policy", pf.metadata.name, doc, ("metadata", "name"))
        spec = pf.spec
        if spec.scope:
            self.excluded.update(spec.scope.excluded_namespaces)
            self.schedulers.update(spec.scope.schedulers)
            self.accelerators.update(dict.fromkeys(spec.scope.accelerators))
        if spec.admission:
            self.gate_removers.update(spec.admission.gate_removers)
        for i, level in enumerate(spec.topology_levels):
            if self._once("topology level", level.name, doc, ("spec", "topologyLevels", i)):
                self.levels[level.name] = level.node_label
        for cls_name, cls_spec in spec.classes.items():
            if self._once("class", cls_name, doc, ("spec", "classes", cls_name)):
                self.classes[cls_name] = (cls_spec, doc)
        for i, rule in enumerate(spec.rules):
            if self._once("rule", rule.name, doc, ("spec", "rules", i, "name")):
                self.rules.append((rule, doc, i))
        self.access.extend(spec.namespace_access)
        self.grants.extend((grant, doc, i) for i, grant in enumerate(spec.grants))
        for i, model in enumerate(spec.gpu_models):
            if self._once("GPU model", model.name, doc, ("spec", "gpuModels", i, "name")):
                self.models.append((model, doc, i))
        for i, queue in enumerate(spec.queues):
            if self._once("queue", queue.name, doc, ("spec", "queues", i, "name")):
                self.queues.append((queue, doc, i))
        if spec.fair_share and self._once("setting", "fairShare", doc, ("spec", "fairShare")):
            self.fair_share = spec.fair_share
        if spec.preemption and self._once("setting", "preemption", doc, ("spec", "preemption")):
            self.preemption = spec.preemption
        if spec.capacity and self._once("setting", "capacity", doc, ("spec", "capacity")):
            self.capacity = spec.capacity
        if spec.gpu_slices:
            self._slices(doc, spec.gpu_slices.mig, "mig")
            self._slices(doc, spec.gpu_slices.shared, "shared")
        for i, mapping in enumerate(spec.device_classes):
            if self._once("device class", mapping.name, doc,
                          ("spec", "deviceClasses", i, "name")):
                self.device_classes.append((mapping, doc, i))
        if spec.default_class and self._once("setting", "defaultClass", doc,
                                             ("spec", "defaultClass")):
            self.default_class = spec.default_class

    def _slices(self, doc: Document, offers: tuple[Slice, ...], kind: str) -> None:
        for i, offer in enumerate(offers):
            if self._once("GPU slice", offer.resource, doc,
                          ("spec", "gpuSlices", kind, i, "resource")):
                self.slices.append(offer)

    def _references(self, sources: tuple[str, ...]) -> None:
        classes = {name: spec for name, (spec, _) in self.classes.items()}
        rules = [rule for rule, _, _ in self.rules]
        for subject, loc, message in (*dangling_references(classes, self.levels, rules),
                                      *preemption_problems(classes)):
            if isinstance(subject, int):
                _, doc, i = self.rules[subject]
                where: Loc = ("spec", "rules", i, *loc)
            else:
                doc = self.classes[subject][1]
                where = ("spec", "classes", subject, *loc)
            self.problems.append(Problem(doc.file, doc.line(where), message))
        queues = [queue for queue, _, _ in self.queues]
        offered = (*self.accelerators, *(s.resource for s in self.slices))
        models = [model for model, _, _ in self.models]
        for index, loc, message in model_problems(models):
            _, doc, i = self.models[index]
            self.problems.append(Problem(doc.file, doc.line(("spec", "gpuModels", i, *loc)),
                                         message))
        for index, loc, message in (*queue_problems(queues, offered),
                                    *model_quota_problems(queues, [m.name for m in models])):
            _, doc, i = self.queues[index]
            self.problems.append(Problem(doc.file, doc.line(("spec", "queues", i, *loc)),
                                         message))
        mappings = tuple(m for m, _, _ in self.device_classes)
        for index, loc, message in device_class_problems(mappings, self.levels,
                                                         tuple(self.accelerators)):
            _, doc, i = self.device_classes[index]
            self.problems.append(Problem(doc.file, doc.line(("spec", "deviceClasses", i,
                                                             *loc)), message))
        for index, loc, message in grant_problems(classes, [g for g, _, _ in self.grants]):
            _, doc, i = self.grants[index]
            self.problems.append(Problem(doc.file, doc.line(("spec", "grants", i, *loc)),
                                         message))
        incomplete = missing_classes(classes)
        if incomplete:
            self.problems.append(Problem(", ".join(sources), None, incomplete))

    def policy(self, sources: tuple[str, ...]) -> Policy:
        self._references(sources)
        if self.problems:
            raise PolicyError(self.problems)
        try:
            return Policy(
                excluded_namespaces=frozenset(self.excluded),
                schedulers=frozenset(self.schedulers),
                accelerators=tuple(self.accelerators),
                gate_removers=frozenset(self.gate_removers),
                topology_levels=dict(self.levels),
                classes={k: v for k, (v, _) in self.classes.items()},
                rules=tuple(r for r, _, _ in self.rules),
                namespace_access=tuple(self.access),
                grants=tuple(g for g, _, _ in self.grants),
                gpu_models=tuple(m for m, _, _ in self.models),
                queues=tuple(q for q, _, _ in self.queues),
                fair_share=self.fair_share or FairShareSpec(),
                preemption=self.preemption or PreemptionSpec(),
                capacity=self.capacity or CapacitySpec(),
                slices=tuple(self.slices),
                device_classes=tuple(m for m, _, _ in self.device_classes),
                default_class=self.default_class,
                sources=sources,
            )
        except ValidationError as e:
            # The checks above should have caught it; never let a reload die of it.
            raise PolicyError([Problem(", ".join(sources), None,
                                       f"invalid merged policy: {err['msg']}")
                               for err in e.errors()]) from None


def merge(docs: list[Document]) -> Policy:
    """The merged policy; PolicyError listing every problem found."""
    merger = _Merger()
    problems: list[Problem] = []
    for doc in docs:
        try:
            merger.add(doc, _parse(doc))
        except PolicyError as e:
            problems.extend(e.problems)
    if problems:
        raise PolicyError(problems + merger.problems)
    return merger.policy(tuple(dict.fromkeys(d.file for d in docs)))
