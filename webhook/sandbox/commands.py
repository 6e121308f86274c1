"""`airlock sandbox up|down|status`: the local control plane with Airlock wired in, left
running in the background for kubectl and scripts."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from webhook.policy.loading import PolicyError, load_policy
from webhook.sandbox import wiring
from webhook.sandbox.autoscaling import launches, start_karpenter
from webhook.sandbox.binaries import (
    Binaries,
    Release,
    UnknownRelease,
    ensure_binaries,
    kubernetes_release,
)
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.gobuilding import BuildError, cache_root
from webhook.sandbox.launching import (
    ControlPlaneError,
    alive,
    launch,
    stop_process_group,
    wait_ready,
)
from webhook.sandbox.nodes import (
    NodeTimes,
    Shape,
    create_nodes,
    lease_seconds,
    shape_of,
    topology,
)
from webhook.sandbox.operating import RunningCommand, build_operators, start_operators
from webhook.sandbox.operators import (
    AUTOSCALERS,
    KARPENTER,
    PYTORCH_ONLY,
    TRAINING_OPERATOR,
    Operator,
    OperatorError,
)
from webhook.sandbox.processes import (
    RESTARTABLE,
    Webhook,
    start_controller,
    start_webhook,
    webhook_reading,
)
from webhook.sandbox.showing import (
    DEMO_FILES,
    WITH_OPERATORS,
    WITHOUT_OPERATORS,
    create_demo,
    demo_pods,
    pods_table,
)


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir) if args.state_dir else cache_root() / "sandbox"


def _read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((state_dir / "state.json").read_text())
        return state
    except (OSError, ValueError):
        return None


def _write_state(state_dir: Path, state: dict[str, Any]) -> None:
    tmp = state_dir / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(state_dir / "state.json")


async def _wire(args: argparse.Namespace, state_dir: Path, state: dict[str, Any],
                plane: ControlPlane, hook: Webhook, shape: Shape) -> NodeTimes:
    """Airlock wired into the plane while its components past the apiserver get ready:
    the controller's credentials first, and the controller started at once (it takes a
    second or two to start); then the rest at once, since no part needs another and each
    waits on a different component (kube-controller-manager makes namespaces'
    ServiceAccounts, KWOK the nodes Ready, the apiserver enforces the policies)."""
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:

        async def wire() -> NodeTimes:
            await _start_controller(api, args, state_dir, state, plane)
            return (await asyncio.gather(
                wiring.create_priority_classes(api, load_policy(args.policies)),
                wiring.publish_policy(api, args.policies),
                create_nodes(api, topology(shape), dra=shape.dra),
                wiring.apply_webhook_configurations(api, wiring.webhook_configurations(
                    hook.url, hook.certs.ca.read_bytes())),
                wiring.apply_admission_policies(api)))[2]

        wired = asyncio.ensure_future(wire())
        try:
            # A component that fails to start is that error at once, not a wiring step
            # that waits on it until it times out.
            await asyncio.to_thread(_plane_ready, plane)
        except Exception:
            wired.cancel()
            raise
        return await wired


async def _start_controller(api: ApiClient, args: argparse.Namespace, state_dir: Path,
                            state: dict[str, Any], plane: ControlPlane) -> None:
    kubeconfig = await wiring.controller_kubeconfig(
        api, plane.url, plane.ca_file, plane.workdir / "controller.kubeconfig")
    running = start_controller(state_dir, kubeconfig, args.policies, detached=True)
    _record(state, "airlock-controller", running.process.pid, running.log, running.argv,
            running.ready)
    _write_state(state_dir, state)


def _plane_ready(plane: ControlPlane) -> None:
    plane.wait_ready()
    parts = ", ".join(f"{name} {secs:.1f}s" for name, secs in plane.timings.items())
    print(f"control plane ready in {plane.start_seconds:.1f}s ({parts})", file=sys.stderr)


def _pids(state: dict[str, Any]) -> list[int]:
    return [int(p["pid"]) for p in state["processes"]]


def _stop(state: dict[str, Any]) -> None:
    for pid in reversed(_pids(state)):
        stop_process_group(pid)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _record(state: dict[str, Any], name: str, pid: int, log: Path,
            argv: list[str] | None = None, ready: str = "") -> None:
    """A process `down` stops; with its `argv`, one `restart` can start again in place."""
    state["processes"].append({"name": name, "pid": pid, "log": str(log),
                               **({"argv": argv, "ready": ready} if argv else {})})


def _start_plane(binaries: Binaries, shape: Shape, state_dir: Path,
                 state: dict[str, Any]) -> ControlPlane:
    """The control plane, its apiserver ready and the rest starting (`_wire` awaits
    them)."""
    plane = ControlPlane(binaries, workdir=state_dir, detached=True,
                         node_lease_seconds=lease_seconds(shape.node_count)).start_apiserver()
    state.update(kubeconfig=str(plane.admin_kubeconfig), apiserver=plane.url)
    for c in plane.components:
        _record(state, c.name, c.process.pid, c.log, c.argv, c.ready)
    _write_state(state_dir, state)
    return plane


def _start_airlock(args: argparse.Namespace, state_dir: Path, state: dict[str, Any],
                   plane: ControlPlane, shape: Shape,
                   hook_starting: concurrent.futures.Future[Webhook] | None
                   ) -> tuple[Webhook, NodeTimes]:
    """The webhook (already starting, or with `--dra` started now, to read pods' claims
    from the plane), the wiring and the controller."""
    hook = hook_starting.result() if hook_starting else start_webhook(
        state_dir, args.policies, True, extra=webhook_reading(plane.admin_kubeconfig))
    state["webhook"] = hook.url
    _record(state, "airlock-webhook", hook.running.process.pid, hook.running.log,
            hook.running.argv, hook.running.ready)
    _write_state(state_dir, state)
    return hook, asyncio.run(_wire(args, state_dir, state, plane, hook, shape))


def _start_operators(operators: list[Operator], state_dir: Path, plane: ControlPlane
                     ) -> tuple[list[RunningCommand], float]:
    """The operators, and the seconds they took to serve."""
    started = time.monotonic()
    running = start_operators(operators, state_dir, plane.admin_kubeconfig, plane.pki.ca,
                              _progress, detached=True)
    return running, time.monotonic() - started


def _record_operators(state_dir: Path, state: dict[str, Any], operators: list[Operator],
                      starting: concurrent.futures.Future[tuple[list[RunningCommand], float]]
                      ) -> None:
    running, seconds = starting.result()
    for op in running:
        _record(state, op.name, op.process.pid, op.log)
    _write_state(state_dir, state)
    print(f"operators {', '.join(o.name for o in operators)} ready in {seconds:.1f}s",
          file=sys.stderr)


def _start(args: argparse.Namespace, state_dir: Path, state: dict[str, Any],
           binaries: Binaries, operators: list[Operator], shape: Shape,
           hook_starting: concurrent.futures.Future[Webhook] | None) -> tuple[
               ControlPlane, Webhook, NodeTimes]:
    """The apiserver, then Airlock and the operators side by side (and, with
    `--demo`, the example workloads that need no operator); each process in `state` as
    soon as it runs, so `down` can stop whatever started even if a later step fails."""
    plane = _start_plane(binaries, shape, state_dir, state)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # The operators need only the apiserver, which takes seconds over their CRDs, and
        # each takes seconds more to serve: time in which Airlock is wired and started.
        operators_starting = pool.submit(_start_operators, operators, state_dir, plane) \
            if operators else None
        try:
            hook, times = _start_airlock(args, state_dir, state, plane, shape,
                                         hook_starting)
            if args.demo:
                _create_demo(plane.admin_kubeconfig, WITHOUT_OPERATORS)
        except BaseException:
            if operators_starting is not None:
                # Recorded even so, for `down` to stop them too; Airlock's failure is the
                # one to tell (one of the plane's takes the operators down with it).
                with contextlib.suppress(Exception):
                    _record_operators(state_dir, state, operators, operators_starting)
            raise
        if operators_starting is not None:
            _record_operators(state_dir, state, operators, operators_starting)
    if args.autoscaler == KARPENTER.name:
        for op in start_karpenter(state_dir, plane.admin_kubeconfig, plane.pki.ca, shape,
                                  _progress, detached=True):
            _record(state, op.name, op.process.pid, op.log)
        _write_state(state_dir, state)
        print(f"karpenter ready: {launches(shape)} "
              "for Unschedulable pods (Airlock asks with placeholders once the policy's "
              "capacity.mode is placeholders: docs/autoscaling.md)", file=sys.stderr)
    return plane, hook, times


def _say_up(shape: Shape, times: NodeTimes, hook: Webhook, state_dir: Path) -> None:
    mig = ", ".join(f"{p}={n}" for p, n in shape.mig)
    print(f"{shape.said()}"
          f"{f' and {shape.mig_nodes} MIG nodes ({mig} each)' if mig else ''} schedulable "
          f"in {times.schedulable:.1f}s (created {times.created:.1f}s, all Ready under KWOK "
          f"{times.ready:.1f}s), webhook at {hook.url}, controller running; logs in "
          f"{state_dir}", file=sys.stderr)


def up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    state_dir = _state_dir(args)
    previous = _read_state(state_dir)
    if previous and all(alive(pid) for pid in _pids(previous)):
        print(f"the sandbox is already up (Kubernetes {previous.get('kubernetes', '?')}; "
              f"`down` first to change it)\nkubeconfig: {previous['kubeconfig']}")
        return _demo(previous, args) if args.demo else 0
    if previous:
        _stop(previous)  # a half-dead sandbox: stop what is left of it, then start afresh
    if state_dir.exists():
        shutil.rmtree(state_dir)
    try:
        shape = shape_of(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        load_policy(args.policies)
        release: Release = args.kubernetes or kubernetes_release()
        binaries = ensure_binaries(_progress, release)
        # The demo's PyTorchJob needs the training-operator to make its pods; that for
        # PyTorchJobs only, unless --operators names the whole of it (the later wins).
        operators = [*([PYTORCH_ONLY] if args.demo else []), *args.operators]
        operators = build_operators(operators, _progress)
        if args.autoscaler:
            build_operators([AUTOSCALERS[args.autoscaler]], _progress)
    except (PolicyError, BuildError, OperatorError, UnknownRelease) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    built = time.monotonic()
    state_dir.mkdir(parents=True)
    print(f"starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager "
          f"({release.version}), KWOK and Airlock's webhook ...", file=sys.stderr)
    state: dict[str, Any] = {"kubeconfig": "", "apiserver": "", "webhook": "",
                             "kubernetes": release.version, "logs": str(state_dir),
                             "processes": []}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # Without DRA the webhook needs no apiserver: it gets ready while the control plane
        # starts. With it, it reads claims from the plane, so it starts after.
        hook_starting = None if shape.dra else pool.submit(start_webhook, state_dir,
                                                           args.policies, True)
        try:
            plane, hook, times = _start(args, state_dir, state, binaries, operators, shape,
                                        hook_starting)
        except Exception as e:
            _stop(state)
            if hook_starting:
                with contextlib.suppress(Exception):  # a webhook the failure left unrecorded
                    stop_process_group(hook_starting.result().running.process.pid)
            # Nothing left to stop: a later `up` or `down` must not signal reused pids.
            (state_dir / "state.json").unlink(missing_ok=True)
            print(f"error: {e}; logs in {state_dir}", file=sys.stderr)
            return 1
    _say_up(shape, times, hook, state_dir)
    print(f"sandbox up in {time.monotonic() - built:.1f}s "
          f"({time.monotonic() - started:.1f}s with the binary check)", file=sys.stderr)
    print(f"kubeconfig: {plane.admin_kubeconfig}")
    return _demo(state, args, WITH_OPERATORS) if args.demo else 0


def down(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args)
    state = _read_state(state_dir)
    if state is None:
        print("the sandbox is not up")
        return 0
    _stop(state)
    shutil.rmtree(state_dir, ignore_errors=True)
    print("the sandbox is down")
    return 0


def status(args: argparse.Namespace) -> int:
    state = _read_state(_state_dir(args))
    if state is None:
        print("the sandbox is not up")
        return 1
    running = {p["name"]: alive(int(p["pid"])) for p in state["processes"]}
    print(f"processes: {sum(running.values())}/{len(running)} running; apiserver "
          f"{state['apiserver']} (Kubernetes {state.get('kubernetes', '?')}); webhook "
          f"{state['webhook']}")
    width = max(map(len, running))
    for p in state["processes"]:
        print(f"  {p['name'].ljust(width)}  pid {p['pid']:<8} "
              f"{'running' if running[p['name']] else 'DEAD   '}  {p['log']}")
    print(f"kubeconfig: {state['kubeconfig']}")
    if not all(running.values()):
        return 1
    print(asyncio.run(pods_table(Path(state["kubeconfig"]))))
    return 0



def _create_demo(kubeconfig: Path, files: tuple[str, ...]) -> None:
    _progress(f"creating {', '.join(files)} from examples/demo ...")
    asyncio.run(create_demo(kubeconfig, files))


def _demo(state: dict[str, Any], args: argparse.Namespace,
          files: tuple[str, ...] = DEMO_FILES) -> int:
    """Create the demo's `files` (those left when `up` made the ones that need no
    operator already), then print the table once every pod has settled."""
    kubeconfig = Path(state["kubeconfig"])
    if TRAINING_OPERATOR.name not in {p["name"] for p in state["processes"]}:
        print("error: this sandbox runs no training-operator to make the demo's PyTorchJob "
              "pods; `airlock sandbox down`, then `airlock sandbox up --demo`", file=sys.stderr)
        return 1
    _create_demo(kubeconfig, files)
    print(asyncio.run(pods_table(kubeconfig, within=args.settle, expected=demo_pods())))
    return 0


def restart(args: argparse.Namespace) -> int:
    """Stop one process of a running sandbox and start it again with the same flags,
    ports and data (etcd's data dir, the apiserver's certificates, the webhook's port):
    what a crashed and restarted component does to the rest."""
    if args.component is None:
        print(f"error: restart what? one of {', '.join(RESTARTABLE)}", file=sys.stderr)
        return 2
    state_dir = _state_dir(args)
    state = _read_state(state_dir)
    if state is None:
        print("the sandbox is not up")
        return 1
    name = RESTARTABLE[args.component]
    entry = next((p for p in state["processes"] if p["name"] == name), None)
    if entry is None or "argv" not in entry:
        print(f"error: this sandbox did not record how it started {name} (started by an "
              "older airlock?): `airlock sandbox down`, then `up`", file=sys.stderr)
        return 1
    began = time.monotonic()
    stop_process_group(int(entry["pid"]), grace=10.0)
    log = Path(entry["log"])
    process = launch(entry["argv"], log, append=True)
    entry["pid"] = process.pid
    _write_state(state_dir, state)
    try:
        wait_ready(name, process, log, entry["ready"])
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{name} restarted (pid {process.pid}), ready {time.monotonic() - began:.1f}s "
          f"after it was stopped; its log: {log}")
    return 0


def run_sandbox(args: argparse.Namespace) -> int:
    return {"up": up, "down": down, "status": status, "restart": restart}[args.action](args)
