"""GPU models in policy: `spec.gpuModels` names the models a cluster mixes behind one
resource name (H100, A100, L4 all ask for `nvidia.com/gpu`), by the node labels that tell
them apart, or the attributes of the DRA devices nodes publish (`productName`). A queue's
quotas per model are `spec.queues[].models` (`queues`). See
docs/gpu-models.md.

"Model" is the word NVIDIA's GPU feature discovery and the DRA driver use
(`nvidia.com/gpu.product`, `productName`), and the one platform teams say: "64 H100s".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from webhook.devices.claims import Ask, gpu_selections
from webhook.devices.kinds import AttributeValue, DeviceKind
from webhook.devices.selectors import Selection
from webhook.operators.karpenter.keys import NODE_POOL_LABEL
from webhook.policy.fields import NAME, Strict
from webhook.policy.sources import Loc
from webhook.values import shown


class GpuModel(Strict):
    """One GPU model the cluster has."""

    name: str = Field(description="What queues, pods (`gpu-airlock.io/gpu-models`), "
                      "status and metrics call it: `h100`, `a100`, `l4`.")
    node_labels: dict[Annotated[str, Field(min_length=1)], str] = Field(
        default_factory=dict, alias="nodeLabels",
        description="Labels every node of the model has, e.g. `{nvidia.com/gpu.product: "
        "NVIDIA-H100-80GB-HBM3}` as GPU feature discovery writes it. A pod of the model "
        "is pinned to them at ungate.")
    node_pool: str | None = Field(
        None, alias="nodePool", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=63,
        description="The Karpenter NodePool that launches nodes of the model: a capacity "
        "request (`spec.capacity.mode: placeholders`) for a gang that waits for the model "
        f"selects it (`{NODE_POOL_LABEL}`) beside `nodeLabels`. Without it, "
        "`nodeLabels` alone select, which every NodePool whose nodes carry them matches.")
    provisioning_class: str | None = Field(
        None, alias="provisioningClass", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The ProvisioningRequest class a request for a gang that waits for the "
        "model names (`spec.capacity.mode: provisioningRequest`); default "
        "`spec.capacity.provisioningClass`.")
    device_attributes: dict[Annotated[str, Field(min_length=1)], AttributeValue] = Field(
        default_factory=dict, alias="deviceAttributes",
        description="Attributes of the DRA devices (of a DeviceClass mapped as a GPU) that "
        "a node of the model publishes in its ResourceSlices, e.g. `{productName: NVIDIA "
        "H100 80GB HBM3}` as NVIDIA's DRA driver writes it; a name without a domain is "
        "the driver's own. With nodeLabels, a node of the model has both.")

    @model_validator(mode="after")
    def _told_apart(self) -> GpuModel:
        if not self.node_labels and not self.device_attributes:
            raise ValueError(f"model {self.name} names neither nodeLabels nor "
                             f"deviceAttributes: nothing tells its nodes apart")
        return self

    @field_validator("name")
    @classmethod
    def _model_name(cls, v: str) -> str:
        if not NAME.match(v) or len(v) > 63:
            raise ValueError(f"{v!r}: model names are lowercase letters, digits, '-' and '.'")
        return v

    def selects(self, labels: Mapping[str, str],
                devices: Mapping[str, frozenset[AttributeValue]] | None = None) -> bool:
        """Whether a node of these labels is of the model; `devices`: the values each
        attribute (by qualified name, and by bare name) has on some GPU device of it."""
        return all(labels.get(k) == v for k, v in self.node_labels.items()) and all(
            v in (devices or {}).get(k, ()) for k, v in self.device_attributes.items())

    def requested_labels(self) -> dict[str, str]:
        """What a capacity request for the model's nodes selects: its labels, and its
        Karpenter NodePool where it names one."""
        pool = {NODE_POOL_LABEL: self.node_pool} if self.node_pool else {}
        return {**self.node_labels, **pool}


def model_named(models: Sequence[GpuModel], name: str | None) -> GpuModel | None:
    return next((m for m in models if m.name == name), None)


def model_of(models: Sequence[GpuModel], labels: Mapping[str, str],
             devices: Mapping[str, frozenset[AttributeValue]] | None = None) -> str | None:
    """The first model whose labels (and device attributes) a node has, or None."""
    return next((m.name for m in models if m.selects(labels, devices)), None)


def attributes_named(models: Sequence[GpuModel]) -> frozenset[str]:
    """The device attributes models tell nodes apart by: all a node's devices need say."""
    return frozenset(k for m in models for k in m.device_attributes)


# Past these, a pod's list of models is not read further: a model name is a label value's
# length at most, and no cluster has dozens of models.
MAX_NAMED = 16
MAX_TEXT = 1024


def named_models(text: object) -> tuple[str, ...]:
    """The models a pod names (`gpu-airlock.io/gpu-models: h100, a100`), most wanted
    first, read within bounds."""
    if not isinstance(text, str):
        return ()
    names = (n.strip() for n in text[:MAX_TEXT].split(",", MAX_NAMED)[:MAX_NAMED])
    return tuple(dict.fromkeys(n for n in names if n and len(n) <= 63))


def unknown_models(text: str, models: Sequence[GpuModel]) -> str | None:
    """Why a pod's list of models cannot be followed, or None."""
    if len(text) > MAX_TEXT or text.count(",") >= MAX_NAMED:
        return f"names more than {MAX_NAMED} models or {MAX_TEXT} characters"
    offered = [m.name for m in models]
    named = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in named if n not in offered]
    if not named or unknown:
        return (f"names {', '.join(shown(n) for n in unknown) or 'no model'}, which the "
                f"policy does not define; the models on offer: {', '.join(offered) or 'none'}")
    return None


def models_for(models: Sequence[GpuModel], order: Sequence[str] | None, named: Sequence[str],
               node_selector: Mapping[str, str]) -> tuple[str, ...]:
    """The models a pod may get, in the order they are tried: its queue's `order` (None:
    every model), narrowed to those it `named` (in its order) and to those whose labels
    its node selector does not contradict."""
    allowed = tuple(m.name for m in models) if order is None else tuple(order)
    if named:
        allowed = tuple(n for n in named if n in allowed)
    labels = {m.name: m.node_labels for m in models}
    return tuple(m for m in allowed if all(
        node_selector.get(k, v) == v for k, v in labels.get(m, {}).items()))


def _declares(model: GpuModel, attribute: str) -> AttributeValue | None:
    """The value the model says its devices have for a qualified attribute, if it says."""
    bare = attribute.rpartition("/")[2]
    return model.device_attributes.get(attribute, model.device_attributes.get(bare))


def _selected(models: Sequence[GpuModel], selection: Selection) -> tuple[str, ...] | None:
    """The models whose devices a request's selection allows: those that declare a value
    it requires of an attribute, and that value; None where it requires nothing of the
    attributes models are told apart by (any model, as far as Airlock knows)."""
    told = [(a, set(values)) for a, values in selection
            if any(_declares(m, a) is not None for m in models)]
    if not told:
        return None
    return tuple(m.name for m in models
                 if all(_declares(m, a) in values for a, values in told))


def claimed_models(models: Sequence[GpuModel], asks: Sequence[Ask],
                   kinds: Mapping[str, DeviceKind]) -> tuple[str, ...] | None:
    """The models a pod's DRA claims (their `asks`) name (`productName` in a selector),
    in the order its first GPU request prefers them: each GPU request allows the models
    of any alternative, and the pod, on one node, only those all its requests allow.
    None: they name none. (): no model of the policy is what they select."""
    named: tuple[str, ...] | None = None
    for alternatives in gpu_selections(asks, kinds):
        found = [_selected(models, s) for s in alternatives]
        if any(f is None for f in found):
            continue  # an alternative of any model
        allowed = tuple(dict.fromkeys(m for f in found if f is not None for m in f))
        named = allowed if named is None else tuple(m for m in named if m in allowed)
    return named


def selection_problem(models: Sequence[GpuModel], asks: Sequence[Ask],
                      kinds: Mapping[str, DeviceKind]) -> str | None:
    """Why a pod's DRA claims select no model the policy defines, or None."""
    if claimed_models(models, asks, kinds) != ():
        return None
    wanted = sorted({f"{a.rpartition('/')[2]} {' or '.join(map(shown, values))}"
                     for alternatives in gpu_selections(asks, kinds)
                     for s in alternatives for a, values in s})
    offered = [f"{m.name} ({', '.join(f'{k}={v}' for k, v in m.device_attributes.items())})"
               for m in models if m.device_attributes]
    return (f"its DRA claims select GPUs of {'; '.join(wanted)}, which no GPU model of the "
            f"policy is; the models on offer: {', '.join(offered) or 'none'}")


def model_problems(models: Sequence[GpuModel]) -> Iterator[tuple[int, Loc, str]]:
    """Two models one node could be, or one NodePool launches. Each as (index, path
    inside the model, message), for the merger's `file:line`."""
    for i, model in enumerate(models):
        for other in models[:i]:
            if model.node_pool is not None and model.node_pool == other.node_pool:
                yield i, ("nodePool",), (f"model {model.name} names NodePool "
                                         f"{model.node_pool}, as {other.name} does; a "
                                         f"request for one would grow the other's nodes")
            if (clash := _clash(model, other)) is not None:
                where = "nodeLabels" if model.node_labels else "deviceAttributes"
                yield i, (where,), clash


def _clash(model: GpuModel, other: GpuModel) -> str | None:
    """Why one node could be of both models, or None."""
    if not (_overlap(other.node_labels, model.node_labels)
            and _overlap(other.device_attributes, model.device_attributes)):
        return None
    what = "nodeLabels and deviceAttributes" if model.device_attributes or \
        other.device_attributes else "nodeLabels"
    value = "label or attribute value" if what != "nodeLabels" else "label value"
    if (model.node_labels, model.device_attributes) == (other.node_labels,
                                                         other.device_attributes):
        both = f"has the same {what} as {other.name}"
    else:
        merged = {**other.node_labels, **model.node_labels, **other.device_attributes,
                  **model.device_attributes}
        both = f"and {other.name} could both be one node ({_text(merged)})"
    return f"model {model.name} {both}; give each model a {value} of its own"


def _overlap(a: Mapping[str, AttributeValue], b: Mapping[str, AttributeValue]) -> bool:
    """Whether one node could carry both label sets: they agree wherever both speak."""
    return all(b[k] == v for k, v in a.items() if k in b)


def _text(labels: Mapping[str, AttributeValue]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
