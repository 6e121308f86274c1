"""Each `kubectl airlock` subcommand: reach the cluster, read what it needs within the
request timeout, and print. Errors from the apiserver or from reaching it become one
line (`reaching.failure`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubernetes_asyncio import client

from webhook.controller.core.configuring import quotas_of
from webhook.controller.shells.statusing import Survey, show, survey
from webhook.plugin import asking, reaching
from webhook.plugin.reaching import Failure, Target
from webhook.plugin.references import BadReference, Reference, parse_reference
from webhook.plugin.tables import queue_rows, queues_json, queues_text
from webhook.plugin.telling import judge
from webhook.policy.model import Policy

__all__ = ["Failure", "run"]

T = TypeVar("T")


async def run(args: argparse.Namespace) -> int:
    if args.command == "why":
        # What is asked about is checked before anything is asked of the cluster.
        try:
            args.target = parse_reference(args.target)
        except BadReference as e:
            raise Failure(str(e)) from None
    target = await reaching.target(args.kubeconfig, args.context, args.namespace)
    if args.command == "explain":
        return await _explain(args, target)
    return await _asking(args, target, _COMMANDS[args.command])


Command = Callable[[argparse.Namespace, client.ApiClient, Target], Awaitable[int]]


async def _asking(args: argparse.Namespace, target: Target,
                  command: Callable[[argparse.Namespace, client.ApiClient, Target],
                                    Awaitable[T]]) -> T:
    """`command` run against the cluster, within the request timeout."""
    try:
        async with asyncio.timeout(args.request_timeout), target.client() as api:
            return await command(args, api, target)
    except reaching.REACHING as e:
        raise reaching.failure(e, target) from None


async def _policy(args: argparse.Namespace, api: client.ApiClient) -> Policy:
    if args.policies is not None:
        return reaching.load(args.policies, str(args.policies))
    with reaching.written(await reaching.cluster_policy_files(api)) as directory:
        return reaching.load(directory, reaching.SHOWN)


async def _survey(args: argparse.Namespace, api: client.ApiClient) -> tuple[Policy, Survey]:
    policy = await _policy(args, api)
    # Asked once: a person waits on the answer, and what the leader kept only colours
    # the fair share.
    return policy, await survey(api, policy, patience=0.0)


async def _status(args: argparse.Namespace, api: client.ApiClient, _target: Target) -> int:
    _, found = await _survey(args, api)
    show(found.report, args.output)
    return 0


async def _queues(args: argparse.Namespace, api: client.ApiClient, _target: Target) -> int:
    policy, found = await _survey(args, api)
    quotas = quotas_of(policy, found.cluster.accelerators)
    limits = {name: None if spec.borrowing_limit is None else float(spec.borrowing_limit)
              for name, spec in quotas.specs.items()}
    status = found.report.as_json()
    rows = queue_rows(status, limits)
    if args.output == "json":
        print(json.dumps(queues_json(rows, status), indent=2))
    else:
        print(queues_text(rows, status), end="")
    return 0


async def _why(args: argparse.Namespace, api: client.ApiClient, target: Target) -> int:
    ref: Reference = args.target
    namespace = target.namespace
    raw = await asking.pods_of(api, namespace, ref)
    labels = await asking.namespace_labels(api, namespace)
    told = await asking.controller_events(api, namespace)
    policy, found = await _survey(args, api)
    pods = [asking.facts(p, namespace, policy, labels, found.cluster, told) for p in raw]
    verdict = judge(ref.shown(namespace), pods, found.report.as_json())
    print(json.dumps(verdict.as_json(), indent=2) if args.output == "json"
          else verdict.text(), end="\n" if args.output == "json" else "")
    return 0


_COMMANDS: dict[str, Command] = {"status": _status, "queues": _queues, "why": _why}


async def _explain(args: argparse.Namespace, target: Target) -> int:
    from webhook.admission.explaining import run_explain

    if args.policies is not None:
        return run_explain(files=args.file, policies=args.policies, output=args.output,
                           strict=args.strict)

    async def files(_args: argparse.Namespace, api: client.ApiClient, _t: Target
                    ) -> dict[str, str]:
        return await reaching.cluster_policy_files(api)

    with reaching.written(await _asking(args, target, files)) as directory:
        return run_explain(files=args.file, policies=directory, output=args.output,
                           strict=args.strict)


