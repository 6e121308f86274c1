"""Explain's expansions against the real controllers: the sandbox runs
kube-controller-manager and the operators (JobSet, LeaderWorkerSet, training-operator,
KubeRay) at the pinned versions, the example workloads are created, and every pod the
controllers make must carry what explain says it would: labels and annotations (keys,
and values other than the stand-ins for UIDs and hashes), owners, name, finalizers,
hostname, subdomain and the environment explain adds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.commands import run_airlock
from tests.kube import kubectl
from tests.paths import POLICIES, ROOT
from webhook.sandbox.binaries import Binaries

EXAMPLES = ROOT / "examples" / "workloads"
# Airlock's own keys: it adds them, and lifts its gate, as it runs.
AIRLOCK = "gpu-airlock.io/"
FILES = ["vllm-deployment.yaml", "statefulset.yaml", "indexed-job.yaml", "jobset.yaml",
         "leaderworkerset.yaml", "pytorchjob.yaml", "training-operator.yaml",
         "raycluster.yaml", "rayjob.yaml"]
# Values explain cannot know offline (it shows stand-ins): UIDs and template hashes.
STAND_INS = {"pod-template-hash", "controller-uid", "batch.kubernetes.io/controller-uid",
             "jobset.sigs.k8s.io/jobset-uid", "controller-revision-hash",
             "leaderworkerset.sigs.k8s.io/template-revision-hash", "ray.io/cluster",
             "ray.io/identifier"}
# Hashes and random suffixes in generated names (rand.String's alphabet, 5 to 10 long).
HASH = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5,10}(?=-|$)")


@pytest.fixture(scope="module")
def cluster(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Path, Path]]:
    state = tmp_path_factory.mktemp("sandbox")
    up = run_airlock("sandbox", "up", "--state-dir", str(state), "--nodes", "4",
                     "--operators", "jobset,lws,training-operator,kuberay",
                     # The first run builds the operators from their Go modules (minutes each).
                     timeout=3600)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        kubeconfig = Path(re.findall(r"^kubeconfig: (\S+)$", up.stdout, re.MULTILINE)[0])
        yield kubeconfig, binaries.kubectl
    finally:
        run_airlock("sandbox", "down", "--state-dir", str(state), timeout=300)


def shape(pod: dict[str, Any]) -> tuple[str, str]:
    """What identifies a pod across explain and the cluster: its name, or for a generated
    one its generateName without hashes (which holds its indexes where it has any)."""
    meta = pod["metadata"]
    name, prefix = meta.get("name", ""), meta.get("generateName")
    if prefix and (not name or re.fullmatch(re.escape(prefix) + "[a-z0-9]{5}", name)):
        name = HASH.sub("", prefix.rstrip("-"))
    return meta["namespace"], name


def theirs(d: dict[str, str] | None) -> dict[str, str]:
    """The operator's keys: without Airlock's own, which it adds or lifts as it runs."""
    return {k: v for k, v in (d or {}).items() if not k.startswith(AIRLOCK)}


def view(pod: dict[str, Any], env: bool) -> dict[str, Any]:
    meta, spec = pod["metadata"], pod["spec"]
    return {
        "labels": {k: (k in STAND_INS) or v for k, v in theirs(meta.get("labels")).items()},
        "annotations": {k: (k in STAND_INS) or v
                        for k, v in theirs(meta.get("annotations")).items()},
        "owners": [(o["apiVersion"], o["kind"], HASH.sub("", o["name"]), o.get("controller"),
                    o.get("blockOwnerDeletion")) for o in meta.get("ownerReferences") or []],
        "generateName": HASH.sub("", (meta.get("generateName") or "").rstrip("-")),
        "finalizers": meta.get("finalizers"),
        "hostname": spec.get("hostname"), "subdomain": spec.get("subdomain"),
        "env": [[e["name"] for e in c.get("env") or []] for c in spec["containers"]]
        if env else None,
    }


def test_every_pod_the_controllers_make_is_the_pod_explain_shows(
        cluster: tuple[Path, Path]) -> None:
    kubeconfig, binary = cluster
    for ns in ("serving", "research"):
        kubectl(binary, "create", "namespace", ns, kubeconfig=kubeconfig, check=False)
    docs = [d for f in FILES for d in yaml.safe_load_all((EXAMPLES / f).read_text()) if d]
    kubectl(binary, "apply", "-f", "-", kubeconfig=kubeconfig, stdin=yaml.safe_dump_all(docs),
            timeout=300)

    explained = run_airlock("explain", "-o", "json", "--policies", str(POLICIES),
                            *[a for f in FILES for a in ("-f", str(EXAMPLES / f))], timeout=300)
    rows = [json.loads(line) for line in explained.stdout.splitlines()]
    expected = {shape(r["mutated"]): r for r in rows}

    # Every workload makes pods at once, but for the StatefulSet (one at a time, and its
    # first waits for a volume) and the RayJob's submitter (once its cluster is ready).
    want = {r["workload"] for r in rows}
    deadline = time.monotonic() + 120
    while True:
        pods = json.loads(kubectl(binary, "get", "pods", "-A", "-o", "json",
                                  kubeconfig=kubeconfig, check=False).stdout)["items"]
        seen = {r["workload"] for p in pods if (r := expected.get(shape(p)))}
        if seen >= want - {"JAXJob/gemma-jax"} or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert seen >= want - {"JAXJob/gemma-jax"}, sorted(want - seen)

    compared, unmatched = 0, []
    for pod in pods:
        if pod["metadata"]["namespace"] not in ("serving", "research"):
            continue
        row = expected.get(shape(pod))
        if row is None:
            unmatched.append(pod["metadata"]["name"])
            continue
        env = any(c.get("env") for c in row["mutated"]["spec"]["containers"])
        assert view(pod, env) == view(row["mutated"], env), (row["workload"], row["name"])
        compared += 1
    assert compared >= 30
    # The only pods explain did not show are those it says it left out (beyond 4 pods of
    # a template: the JobSet's and the LeaderWorkerSet's workers).
    hidden = sum(int(n) for n in re.findall(r"(\d+) more pod\(s\)", explained.stderr))
    assert len(unmatched) == hidden, unmatched
