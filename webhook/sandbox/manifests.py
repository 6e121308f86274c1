"""An operator's own manifests (its CRDs, its admission webhooks and kustomize's patches
of them) from its Go module at the version its binaries are built from.

They are copied once from the module's source beside the binaries, so a later start
needs neither Go nor the module cache, and read back as kustomize would build them, each
webhook pointed at the operator's loopback server.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from webhook.certificates import write_file
from webhook.sandbox.gobuilding import GoModule
from webhook.sandbox.operators import Operator, OperatorError
from webhook.sandbox.wiring import point_at


def _manifest_dir(op: Operator) -> Path:
    return op.tool.directory / "manifests"


def _module_source(op: Operator) -> Path:
    return module_source(op.tool.modules[0], op.name, op.tool.directory, op.tool.env)


def module_source(module: GoModule, who: str, cwd: Path,
                  env: Mapping[str, str] | None = None) -> Path:
    """Where the module's source is, fetched through the module proxy if need be (once;
    Go's module cache keeps it)."""
    go = shutil.which("go")
    if go is None:
        raise OperatorError(f"{who}: Go is needed to fetch {module.path}@{module.version}")
    cwd.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([go, "mod", "download", "-json", f"{module.path}@{module.version}"],
                         capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "GOWORK": "off", **(env or {})})
    if out.returncode != 0:
        raise OperatorError(f"{who}: go mod download {module.path}@{module.version} "
                            f"failed: {out.stdout}{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def _manifest_files(op: Operator) -> list[str]:
    kustomization = [op.webhook_kustomization] if op.webhook_kustomization else []
    return [*op.crds, *op.webhooks, *(patch for patch, _ in op.webhook_patches),
            *kustomization]


def _manifest_stamp(op: Operator) -> str:
    """Which files of which module version are stored: a changed entry stores anew."""
    return json.dumps([op.tool.recipe, _manifest_files(op)])


# KubeRay's CRDs alone are 3 MB of YAML: half a minute to parse in pure Python, on every
# start. They are parsed once, with libyaml when there is one, and kept as JSON.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def store_manifests(op: Operator, source: Path) -> None:
    """The operator's manifests from its module `source`, each kept as JSON (a list of
    its documents) beside the binaries."""
    for rel in _manifest_files(op):
        target = _manifest_dir(op) / f"{rel}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        docs = list(yaml.load_all((source / rel).read_text(), Loader=_LOADER))
        write_file(target, json.dumps(docs).encode())
    (_manifest_dir(op) / ".stored").write_text(_manifest_stamp(op))


def ensure_manifests(op: Operator) -> None:
    """Stored anew only when the entry changed: reading the module's source takes Go and
    the module cache, which a later start must not need."""
    stamp = _manifest_dir(op) / ".stored"
    if not stamp.exists() or stamp.read_text() != _manifest_stamp(op):
        store_manifests(op, _module_source(op))


# --- read back, as kustomize would build them ------------------------------------------

def _stored(op: Operator, rel: str) -> list[Any]:
    docs: list[Any] = json.loads((_manifest_dir(op) / f"{rel}.json").read_bytes())
    return docs


def _documents(op: Operator, files: Iterable[str]) -> list[dict[str, Any]]:
    return [d for rel in files for d in _stored(op, rel) if d]


def crds(op: Operator) -> list[dict[str, Any]]:
    docs = _documents(op, op.crds)
    if op.resources:
        docs = [d for d in docs if op.serves([d["spec"]["names"]["plural"]])]
    if op.strip_crd_labels:
        for doc in docs:
            doc["metadata"].pop("labels", None)
    return docs


def merge_webhooks(doc: dict[str, Any], patches: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """kustomize's strategic merge of inline patches into one webhook configuration:
    a patch of the same kind and name replaces the fields it gives of each webhook it
    names (webhooks merge by their `name`)."""
    out = copy.deepcopy(doc)
    hooks = {hook["name"]: hook for hook in out["webhooks"]}
    for patch in patches:
        if (patch.get("kind"), patch["metadata"]["name"]) != \
                (doc["kind"], doc["metadata"]["name"]):
            continue
        for fields in patch.get("webhooks") or []:
            if fields["name"] in hooks:
                hooks[fields["name"]].update(copy.deepcopy(fields))
    return out


def _inline_patches(op: Operator) -> list[dict[str, Any]]:
    if op.webhook_kustomization is None:
        return []
    kustomization = _stored(op, op.webhook_kustomization)[0]
    return [yaml.safe_load(p["patch"]) for p in kustomization.get("patches") or []
            if "patch" in p]


def webhook_configurations(op: Operator, url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The operator's webhook configurations as kustomize would build them, each hook's
    Service swapped for `url` (the loopback server) trusting `ca_pem`."""
    patches = {name: _stored(op, rel)[0] for rel, name in op.webhook_patches}
    inline = _inline_patches(op)
    out = []
    for doc in _documents(op, op.webhooks):
        name = doc["metadata"]["name"]
        if name in patches:
            doc = jsonpatch.apply_patch(doc, patches[name])
        doc = merge_webhooks(doc, inline)
        doc["webhooks"] = [hook for hook in doc["webhooks"] if op.serves(
            [r for rule in hook.get("rules") or [] for r in rule.get("resources") or []])]
        doc["metadata"]["name"] = op.name_prefix + doc["metadata"]["name"]
        point_at(doc, url, ca_pem)
        out.append(doc)
    return out

