"""`airlock explain`: what admission would do to the pods of some files, offline.

The files hold what people write: Pods, and the workloads that make them (Deployments,
Jobs, JobSets, PyTorchJobs, ...), which each operator's expansion (`webhook.operators`)
turns into the pods its controller would create. Each pod then runs through the very
engine the server runs (mutate, apply the patch, validate the result, as the apiserver
would), so what it prints is what a cluster gets.

At most MAX_PODS_PER_TEMPLATE pods of each template are explained: the rest differ only in
their index, and `replicas: 1000` should not print 1000 pods. The output says how many
more there are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml

from webhook.admission import engine
from webhook.admission.aligning import as_admitted
from webhook.admission.claiming import ClaimKey, Claims, claimed, entry, kind_of
from webhook.admission.modelpins import models_of
from webhook.admission.prioritizing import value_of
from webhook.admission.reviews import Request
from webhook.devices.claims import Ask, claims_gpus
from webhook.keys import IGNORE_NAMESPACE_LABEL, QUEUED_ANNOTATION
from webhook.operators.registry import EXPANSIONS, supported
from webhook.operators.sizing import owner_size
from webhook.pods import PodShapeError, PodView
from webhook.policy.classifying import classify
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy
from webhook.workloads.documents import Document, parse_documents
from webhook.workloads.expansions import Context, Expansion
from webhook.workloads.kinds import NO_PODS, group_kind
from webhook.workloads.objects import WorkloadError
from webhook.workloads.templates import display_name

MAX_PODS_PER_TEMPLATE = 4


@dataclass(frozen=True, slots=True)
class _Source:
    file: str
    doc: Document

    def at(self, path: tuple[str | int, ...] = ()) -> str:
        return f"{self.file}:{self.doc.line_of(path)}"


def explain_pod(obj: Mapping[str, Any], policy: Policy, namespace_labels: Mapping[str, str],
                owners: Sequence[Mapping[str, Any]] = (), claims: Claims | None = None
                ) -> dict[str, Any]:
    """What admission does to one pod; `owners` are the objects that may state its gang's
    size (the workload it came from, PodGroups in the same files); `claims`, the DRA
    claims and templates of its namespace in the same files."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    claims = claims or {}
    pod = PodView.parse(obj, namespace)
    looked = claimed(pod, claims, policy) if pod.claims else pod
    if isinstance(looked, PodView):
        pod = looked
    decision = classify(pod, policy, namespace_labels)
    gang = decision.gang
    result: dict[str, Any] = {
        "name": pod.name, "namespace": namespace,
        "class": decision.class_, "rule": decision.rule,
        "gang": None if gang is None else {
            "name": gang.name,
            "size": gang.size if gang.size is not None else owner_size(
                gang.source, obj, owners, _joins(policy, claims)),
            "source": gang.source},
        # DRA devices its claims ask for, by DeviceClass.
        "devices": {c: n for c, k in policy.device_kinds.items()
                    if (n := (pod.devices or {}).get(k.resource))},
        "gpuModels": _listed(models_of(pod, policy)) if decision.in_scope else None,
    }
    if namespace_labels.get(IGNORE_NAMESPACE_LABEL) == "true":
        # The webhook's namespaceSelector keeps such pods from reaching Airlock at all.
        patch: list[Any] = []
        mutated: dict[str, Any] = dict(obj)
        allowed, reason, warnings = True, decision.reason, []
    else:
        request = Request(uid="explain", operation="CREATE", namespace=namespace,
                          username="airlock-explain", object=obj, old_object=None)
        mutation = engine.handle(engine.MUTATE, request, policy, claims)
        patch = list(mutation.patch)
        mutated = jsonpatch.apply_patch(obj, patch) if patch else dict(obj)
        verdict = engine.handle(
            engine.VALIDATE,
            Request(uid="explain", operation="CREATE", namespace=namespace,
                    username="airlock-explain", object=mutated, old_object=None), policy,
            claims)
        allowed = mutation.allowed and verdict.allowed
        reason = verdict.message or mutation.message or decision.reason
        warnings = list(mutation.warnings) + list(verdict.warnings)
    pc_name = (mutated.get("spec") or {}).get("priorityClassName")
    result.update({
        "priorityClassName": pc_name,
        "priority": value_of(policy, pc_name),
        "allowed": allowed, "reason": reason, "warnings": warnings,
        "patch": patch, "mutated": mutated,
    })
    return result


def _listed(models: tuple[str, ...] | None) -> list[str] | None:
    return None if models is None else list(models)


def _joins(policy: Policy, claims: Claims) -> Callable[[Any], bool]:
    """Whether a pod template's pods join their gang: they request an accelerator, or
    claim GPUs through the DRA claims and templates in the files."""
    counted, kinds = policy.counted(), policy.device_kinds
    return lambda template: counted.joins(template) or claims_gpus(
        template, lambda kind, name: claims.get((kind, name)), kinds)


def _text(r: Mapping[str, Any], indent: str = "") -> str:
    gang = r["gang"]
    queued = ((r["mutated"].get("metadata") or {}).get("annotations") or {}).get(
        QUEUED_ANNOTATION) == "true"
    gang_text = ("- (a single pod, queued: gated until the controller admits it)" if queued
                 else "-") if gang is None else \
        f"{gang['name']} (size {gang['size'] or '?'}, {gang['source']})"
    lines = [
        f"{r['namespace']}/{r['name']}: {'allowed' if r['allowed'] else 'DENIED'}",
        f"  class:    {r['class'] or '-'} (rule {r['rule'] or '-'}; {r['reason']})",
        f"  gang:     {gang_text}",
        f"  priority: {r['priorityClassName'] or '-'} ({r['priority']})",
        f"  patch:    {len(r['patch'])} operation(s)",
    ]
    if r.get("gpuModels") is not None:
        lines.insert(3, f"  models:   {', '.join(r['gpuModels']) or 'none it may run on'}")
    if r["devices"]:
        claimed = ", ".join(f"{n} x {c}" for c, n in r["devices"].items())
        lines.insert(3, f"  devices:  {claimed} (DRA claims)")
    lines += [f"  warning:  {w}" for w in r["warnings"]]
    return "\n".join(indent + line for line in lines)


def _read(files: list[Path]) -> tuple[list[_Source], list[str]]:
    sources: list[_Source] = []
    errors: list[str] = []
    for f in files:
        name = "<stdin>" if str(f) == "-" else str(f)
        try:
            text = sys.stdin.read() if str(f) == "-" else f.read_text()
            sources.extend(_Source(name, d) for d in parse_documents(text))
        except OSError as e:
            errors.append(f"{name}: cannot read: {e.strerror}")
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{name}:{mark.line + 1}" if mark is not None else name
            errors.append(f"{where}: not valid YAML or JSON: {getattr(e, 'problem', e)}")
    return sources, errors


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{obj.get('kind')}/{name or '?'}"


class _Run:
    """One explain run: its output streams and what it has seen."""

    def __init__(self, policy: Policy, output: str, sources: list[_Source]) -> None:
        self.policy = policy
        self.output = output
        self.failed = False
        self.explained = 0
        self.unknown = 0
        objs = [s.doc.obj for s in sources if isinstance(s.doc.obj, dict)]
        self.namespaces = {
            (d.get("metadata") or {}).get("name"): (d.get("metadata") or {}).get("labels") or {}
            for d in objs if d.get("kind") == "Namespace"
        }
        # An object beside the pods may state their gang's size: a PodGroup, the
        # PyTorchJob whose pods the file also holds.
        self.objects = tuple(objs)
        # What the DRA claims and templates in the files ask for, by namespace.
        self.claims: dict[str, dict[ClaimKey, tuple[Ask, ...]]] = {}
        for d in objs:
            kind = kind_of(d)
            found = entry(as_admitted(d, policy), kind) if kind is not None else None
            if found is not None:
                self.claims.setdefault(found[0], {})[found[1]] = found[2]

    def error(self, message: str) -> None:
        self.failed = True
        print(message, file=sys.stderr)

    def expand(self, source: _Source, ctx: Context) -> Expansion | None:
        obj = source.doc.obj
        if not isinstance(obj, dict):
            self.error(f"{source.at()}: not an object")
            return None
        try:
            key = group_kind(obj)
            expand = EXPANSIONS.get(key)
            if expand is not None:
                return expand(obj, ctx)
        except WorkloadError as e:
            self.error(f"{source.at(e.path)}: {_describe(obj)}: {e}")
            return None
        if key in NO_PODS:
            print(f"{source.at()}: {_describe(obj)} makes no pods: skipped", file=sys.stderr)
        else:
            self.unknown += 1
            print(f"{source.at()}: {_describe(obj)}: unknown kind {key[1]!r} "
                  f"(apiVersion {obj.get('apiVersion')}); explain expands "
                  f"{', '.join(supported())}", file=sys.stderr)
        return None

    def explain(self, source: _Source, expansion: Expansion) -> None:
        rows: list[dict[str, Any]] = []
        more: list[str] = []
        for group in expansion.groups:
            for i, pod in enumerate(group.pods(MAX_PODS_PER_TEMPLATE)):
                ns = (pod.get("metadata") or {}).get("namespace") or "default"
                try:
                    row = explain_pod(pod, self.policy, self.namespaces.get(ns, {}),
                                      (*group.owners, *self.objects),
                                      self.claims.get(ns, {}))
                except PodShapeError as e:
                    self.error(f"{source.at()}: {expansion.workload}: not a valid Pod: {e}")
                    return
                row["name"] = display_name(pod, expansion.workload, group.template, str(i))
                rows.append({"workload": expansion.workload, **row})
            hidden = group.count - MAX_PODS_PER_TEMPLATE
            if hidden > 0:
                more.append(f"{hidden} more pod(s) of {group.template} not shown "
                            f"({group.count} in all; they differ only in their index)")
        self.explained += len(rows)
        if self.output == "json":
            for row in rows:
                print(orjson.dumps(row).decode())
            for line in (*expansion.notes, *more):
                print(f"{expansion.workload}: {line}", file=sys.stderr)
            return
        print(f"{expansion.workload} (namespace {expansion.namespace}): "
              f"{expansion.count} pod(s)")
        for line in expansion.notes:
            print(f"  note: {line}")
        for row in rows:
            print(_text(row, "  "))
        for line in more:
            print(f"  ... {line}")


def run_explain(files: list[Path], policies: Path, output: str, strict: bool = False,
                now: datetime | None = None) -> int:
    try:
        policy = load_policy(policies)
    except PolicyError as e:
        print(f"policy in {policies} is invalid:\n{e}", file=sys.stderr)
        return 1
    sources, errors = _read(files)
    run = _Run(policy, output, sources)
    for message in errors:
        run.error(message)
    ctx = Context(now=now or datetime.now(UTC))
    for source in sources:
        expansion = run.expand(source, ctx)
        if expansion is not None:
            run.explain(source, expansion)
    # An unknown kind fails the run when nothing else was explained, or when asked to.
    if run.unknown and (strict or not run.explained):
        return 1
    return 1 if run.failed else 0
