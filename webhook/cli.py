"""The `airlock` command line. Each subcommand parses its flags here and hands off to
the module that does the work; nothing here decides anything."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

DEFAULT_CERT_DIR = Path("certs")
POLICIES_HELP = "policy directory (default: ./policies, else the policy shipped with Airlock)"


def _policies(given: Path | None) -> Path | None:
    """The policy directory to read (saying so on stderr when it is the shipped default),
    or None after reporting that a given one does not exist."""
    from webhook.policy.locating import locate_policies
    from webhook.policy.sources import PolicyError

    try:
        directory, note = locate_policies(given)
    except PolicyError as e:
        print(e, file=sys.stderr)
        return None
    if note:
        print(note, file=sys.stderr)
    return directory


def _serve(args: argparse.Namespace) -> int:
    from webhook.admission.serving import run_server

    policies = _policies(args.policies)
    if policies is None:
        return 1
    return run_server(port=args.port, cert_dir=args.cert_dir, policies=policies,
                      host=args.host, drain_seconds=args.drain_seconds,
                      auth=args.metrics_auth, kubeconfig=args.kubeconfig, dra=args.dra,
                      priority_classes=args.priority_classes)


def _explain(args: argparse.Namespace) -> int:
    from webhook.admission.explaining import run_explain

    policies = _policies(args.policies)
    if policies is None:
        return 1
    return run_explain(files=args.file, policies=policies, output=args.output,
                       strict=args.strict)


def _lint(args: argparse.Namespace) -> int:
    from webhook.policy.linting import run_lint

    policies = _policies(args.dir)
    if policies is None:
        return 1
    return run_lint(policies, schema_out=args.schema,
                    webhook_configurations=args.webhook_configurations)


def _certs(args: argparse.Namespace) -> int:
    from webhook.certificates import run_certs

    return run_certs(out=args.out, hosts=args.host)


def _controller(args: argparse.Namespace) -> int:
    from webhook.controller.shells.running import run_controller

    return run_controller(args)


def _status(args: argparse.Namespace) -> int:
    from webhook.controller.shells.statusing import run_status

    policies = _policies(args.policies)
    if policies is None:
        return 1
    return run_status(args.kubeconfig, policies, args.output)


def _sandbox(args: argparse.Namespace) -> int:
    from webhook.sandbox.commands import run_sandbox

    return run_sandbox(args)


def _simulate(args: argparse.Namespace) -> int:
    from webhook.simulation.commands import run_simulate

    args.policies = _policies(args.policies)
    if args.policies is None:
        return 1
    if args.cluster_from is not None:
        from webhook.pools import PoolError
        from webhook.recording.commands import live_pools

        try:
            args.cluster = live_pools(args.cluster_from, args.context)
        except PoolError as e:
            print(e, file=sys.stderr)
            return 2
    return run_simulate(args)


def _record(args: argparse.Namespace) -> int:
    from webhook.recording.commands import run_record

    args.policies = _policies(args.policies)
    if args.policies is None:
        return 1
    return run_record(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airlock",
        description="Gang admission and GPU-aware policy for the stock Kubernetes scheduler.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_explain(sub)
    _add_status(sub)
    _add_lint(sub)
    _add_certs(sub)
    _add_elsewhere(sub)
    return parser


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run the admission webhook over HTTPS")
    serve.add_argument("--port", type=int, default=8443)
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on")
    serve.add_argument("--cert-dir", type=Path, default=None,
                       help="directory with tls.crt and tls.key (default: make a development "
                            "CA and certificate under certs/)")
    serve.add_argument("--policies", type=Path, default=None, help=POLICIES_HELP)
    serve.add_argument("--drain-seconds", type=float, default=5.0,
                       help="on SIGTERM, report not-ready and keep serving this long before "
                            "closing, so the apiserver stops sending first")
    from webhook.metricsauth.options import add_metrics_auth_argument
    from webhook.reach import MODES

    add_metrics_auth_argument(serve)
    serve.add_argument("--dra", choices=MODES, default=None,
                       help="read pods' DRA claims: `kubernetes`, watch ResourceClaims and "
                            "ResourceClaimTemplates, so a pod claiming GPUs through "
                            "resourceClaims is governed like one requesting them; `none`, "
                            "judge pods without their claims. Default: kubernetes in a pod "
                            "or with --kubeconfig, none otherwise")
    serve.add_argument("--priority-classes", choices=MODES, default=None,
                       help="read the cluster's PriorityClasses: `kubernetes`, watch them, "
                            "so the webhook writes the priority a class it sets gives and "
                            "the apiserver calls it once a pod; `none`, leave that to the "
                            "apiserver, which then calls it again. Default: kubernetes in "
                            "a pod or with --kubeconfig, none otherwise")
    serve.add_argument("--kubeconfig", type=Path, default=None,
                       help="credentials for reviewing the tokens of /metrics scrapers, "
                            "for watching DRA claims and PriorityClasses (default: "
                            "in-cluster, then ~/.kube/config); nothing else is asked of "
                            "the apiserver")
    serve.set_defaults(func=_serve)


def _add_explain(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = sub.add_parser("explain", help="show offline what admission does to the pods "
                                             "of Pods and workloads (Deployments, Jobs, ...)")
    explain.add_argument("-f", "--file", action="append", required=True, type=Path,
                         help="YAML or JSON file of Pods and workloads (multi-document); "
                              "repeatable; - for stdin")
    explain.add_argument("--policies", type=Path, default=None, help=POLICIES_HELP)
    explain.add_argument("--strict", action="store_true",
                         help="fail on an object of a kind explain does not know")
    explain.add_argument("-o", "--output", choices=("text", "json"), default="text")
    explain.set_defaults(func=_explain)


def _add_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser("status", help="queues, waiting gangs and why, recent "
                                           "preemptions")
    status.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    status.add_argument("--policies", type=Path, default=None,
                        help="the policy the controller reads, for its queues (default: "
                             "./policies, else the policy shipped with Airlock)")
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    status.set_defaults(func=_status)


def _add_lint(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = sub.add_parser("lint", help="validate policy files")
    lint.add_argument("dir", nargs="?", type=Path, default=None, help=POLICIES_HELP)
    lint.add_argument("--schema", type=Path, default=None,
                      help="also write the policy JSON Schema to this file")
    lint.add_argument("--webhook-configurations", type=Path, default=None, metavar="FILE",
                      help="also check that the webhooks' pre-filter in FILE (e.g. `kubectl "
                           "get mutatingwebhookconfigurations,validatingwebhookconfigurations "
                           "airlock -o yaml`) passes the policy's accelerators")
    lint.set_defaults(func=_lint)


def _add_certs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    certs = sub.add_parser("certs", help="make a development CA and serving certificate")
    certs.add_argument("--out", type=Path, default=DEFAULT_CERT_DIR)
    certs.add_argument("--host", action="append", default=None,
                       help="extra DNS name or IP for the serving certificate; repeatable")
    certs.set_defaults(func=_certs)


def _add_elsewhere(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """The commands whose options live beside their code."""
    controller = sub.add_parser("controller", help="run the gang controller")
    from webhook.controller.shells.options import add_controller_arguments

    add_controller_arguments(controller)
    controller.set_defaults(func=_controller)

    _add_optional(sub, "sandbox", "a real local control plane with Airlock wired in",
                  "webhook.sandbox", _sandbox_options, _sandbox)
    _add_optional(sub, "simulate", "replay a trace of jobs with a virtual clock: Airlock's "
                  "own decisions, or the stock scheduler", "webhook.simulation",
                  _simulate_options, _simulate)
    _add_optional(sub, "record", "write a trace of a live cluster's GPU work, watched or "
                  "from the controller's lifecycle log, that simulate replays",
                  "webhook.recording", _record_options, _record)


AddArguments = Callable[[argparse.ArgumentParser], None]


def _sandbox_options() -> AddArguments:
    from webhook.sandbox.options import add_sandbox_arguments

    return add_sandbox_arguments


def _simulate_options() -> AddArguments:
    from webhook.simulation.commands import add_simulate_arguments

    return add_simulate_arguments


def _record_options() -> AddArguments:
    from webhook.recording.commands import add_record_arguments

    return add_record_arguments


def _add_optional(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                  summary: str, package: str, options: Callable[[], AddArguments],
                  run: Callable[[argparse.Namespace], int]) -> None:
    """A command of a package the container image leaves out (.dockerignore): the sandbox
    and the simulation, which only a developer's machine runs. Where the package is
    missing, the command knows none of its options, so it takes every word after its name
    as it comes (no prefix character starts an option, --help included) and says that it
    is not installed."""
    try:
        add_arguments = options()
    except ModuleNotFoundError as e:
        # Only the package itself missing means it was left out: a module missing inside
        # it, or a dependency it needs, is a broken install and fails as such.
        if e.name != package:
            raise
        command = sub.add_parser(name, help=summary, prefix_chars="\0", add_help=False)
        command.add_argument("words", nargs="*")
        command.set_defaults(func=lambda _args: _not_installed(command.prog))
        return
    command = sub.add_parser(name, help=summary)
    add_arguments(command)
    command.set_defaults(func=run)


def _not_installed(prog: str) -> int:
    print(f"{prog}: not in this installation. The container image holds only what the "
          "webhook and the controller run; run it from a checkout of Airlock "
          "(./scripts/setup.sh makes .venv/bin/airlock).", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
