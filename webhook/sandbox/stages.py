"""KWOK's own Stage configuration and ClusterRole, read from the KWOK module at its pinned
version. The stages say how the fake nodes and their pods move through their lives:

- node-initialize (node/fast) and node-heartbeat-with-lease: a node becomes Ready with
  the capacity it was made with, and KWOK renews its Lease;
- pod-ready (pod/fast): a pod bound to a fake node becomes Running and Ready;
- pod-complete (pod/general): a pod succeeds after the run time in KWOK's annotation
  `pod-complete.stage.kwok.x-k8s.io/delay`;
- pod-delete (pod/fast): a deleted pod goes away, as a kubelet would let it: at once, or
  after the time in KWOK's annotation `pod-delete.stage.kwok.x-k8s.io/delay`, a pod
  whose work takes that long to stop after SIGTERM (a checkpoint written on the way out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from webhook.certificates import write_file
from webhook.sandbox.binaries import KWOK, KWOK_VERSION

STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/general/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)
DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
TERMINATION_DELAY = "pod-delete.stage.kwok.x-k8s.io/delay"


class StagesError(RuntimeError):
    pass


def _module_dir() -> Path:
    go = shutil.which("go")
    if go is None:
        raise StagesError("Go is needed to read KWOK's stages from its module (sigs.k8s.io/"
                          f"kwok@{KWOK_VERSION}), and `go` is not on PATH")
    out = subprocess.run([go, "mod", "download", "-json", f"sigs.k8s.io/kwok@{KWOK_VERSION}"],
                         capture_output=True, text=True, cwd=KWOK.directory,
                         env={**os.environ, "GOWORK": "off"}, check=False)
    if out.returncode != 0:
        raise StagesError(f"could not download sigs.k8s.io/kwok@{KWOK_VERSION}: "
                          f"{out.stderr.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


OWNER_KIND = ".metadata.ownerReferences.[].kind"


def adjust(stage: dict[str, Any]) -> dict[str, Any]:
    """The sandbox's changes to KWOK's stages.

    The fast pod-delete stage ends a deleted pod after the time its annotation
    `TERMINATION_DELAY` says (KWOK's general stage reads the same annotation), at once
    without one: the time a victim of preemption still holds its node.

    The general pod-complete stage: the run time decides, not the owner: a pod with one
    completes, whoever made it (upstream completes only a Job's pods; a plain pod, a Kueue
    or coscheduling pod group's member, is the pod a user writes too); a pod without one
    runs until deleted, like a long training run. And the run time is exactly that
    annotation: upstream's default jitter (5 s) would otherwise cap any longer run time at
    5 s (KWOK takes the jitter when it is shorter)."""
    if stage["metadata"]["name"] == "pod-delete":
        stage["spec"]["delay"] = {"durationMilliseconds": 0, "durationFrom": {
            "expressionFrom": f'.metadata.annotations["{TERMINATION_DELAY}"]'}}
        return stage
    if stage["metadata"]["name"] != "pod-complete":
        return stage
    spec = stage["spec"]
    expressions = [e for e in spec["selector"]["matchExpressions"] if e["key"] != OWNER_KIND]
    expressions.append({"key": f'.metadata.annotations["{DELAY}"]', "operator": "Exists"})
    spec["selector"]["matchExpressions"] = expressions
    spec["delay"].pop("jitterDurationMilliseconds", None)
    return stage


# KWOK works 4 nodes, leases and pods at a time by default: at 5,000 nodes that made
# nodes Ready at 6 a second and let leases expire while the rest were initialised.
OPTIONS = {"nodePlayStageParallelism": 16, "nodeLeaseParallelism": 16,
           "podPlayStageParallelism": 16, "podsOnNodeSyncParallelism": 4}


def write_config(path: Path) -> Path:
    """KWOK's --config: its options, then the stages, read afresh from the module cache
    each time (tens of milliseconds) so they always match this code."""
    root = _module_dir() / "kustomize" / "stage"
    docs = [{"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
             "options": OPTIONS}]
    docs += [adjust(yaml.safe_load((root / name).read_text())) for name in STAGES]
    write_file(path, yaml.safe_dump_all(docs, sort_keys=False).encode())
    return path


def cluster_role() -> dict[str, Any]:
    """KWOK's own ClusterRole (kustomize/rbac), which the sandbox binds to KWOK's user."""
    role: dict[str, Any] = yaml.safe_load(
        (_module_dir() / "kustomize" / "rbac" / "role.yaml").read_text())
    return role
