"""The image carries what the webhook and the controller run, and nothing only a developer's
machine runs: its wheel, built as the Dockerfile builds it from the context .dockerignore
leaves, holds no sandbox (Go builds, subprocesses) and no simulation; every module it holds
imports without them, and its `airlock` says that those commands are not installed rather
than failing.

The wheel is built here with the setuptools the image builds it with (deploy/image/build.lock,
which scripts/setup.sh installs in .venv), in a second or two.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.paths import DOCKERFILE, ROOT
from webhook.cli import build_parser

# What the image leaves out, by .dockerignore.
LEFT_OUT = ("webhook/sandbox", "webhook/simulation", "webhook/recording")


def ignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: `*` and `?` within one path segment,
    `**` across any number of them."""
    out = ""
    for token in re.split(r"(\*\*/?|\*|\?)", pattern.strip("/")):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
            token, re.escape(token))
    return re.compile(out)


def ignored(path: str, patterns: Sequence[str]) -> bool:
    """Whether Docker leaves `path` (relative to the context, /-separated) out of the
    context: the last pattern that matches it or a directory above it decides, and a `!`
    pattern keeps what it matches."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    verdict = False
    for pattern in patterns:
        if any(_regex(pattern.removeprefix("!")).fullmatch(p) for p in prefixes):
            verdict = not pattern.startswith("!")
    return verdict


def _copy(source: Path, target: Path) -> None:
    """A file, or a link as a link (webhook/policy/defaults), as COPY keeps it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        target.symlink_to(source.readlink())
    else:
        shutil.copyfile(source, target)


def build_context(workdir: Path) -> None:
    """The build stage's WORKDIR as its COPY instructions fill it from the context
    .dockerignore leaves: what the wheel is built from. Copies to absolute paths (the
    locks, under /tmp) and from other stages do not land there."""
    patterns = ignore_patterns()
    for line in DOCKERFILE.read_text().splitlines():
        words = line.split()
        if words[:1] != ["COPY"] or any(w.startswith("--from") for w in words):
            continue
        *sources, destination = words[1:]
        if destination.startswith("/"):
            continue
        for name in sources:
            source = ROOT / name
            files = ([source] if not source.is_dir() else
                     sorted(p for p in source.rglob("*") if p.is_symlink() or p.is_file()))
            for file in files:
                if ignored(file.relative_to(ROOT).as_posix(), patterns):
                    continue
                if source.is_dir():
                    _copy(file, workdir / destination / file.relative_to(source))
                elif destination.endswith("/"):
                    _copy(file, workdir / destination / file.name)
                else:
                    _copy(file, workdir / destination)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Airlock's wheel for the image, built with the Dockerfile's command."""
    workdir, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheels")
    build_context(workdir)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                           "--no-deps", "--wheel-dir", str(out), "."], cwd=workdir,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    into = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into)
    return into


def test_the_dockerfile_builds_the_wheel_from_its_workdir() -> None:
    """What `build_context` reads: the wheel is built from the build stage's WORKDIR."""
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    assert "WORKDIR /src" in lines
    (build,) = [line for line in lines if "pip wheel" in line]
    assert " --wheel-dir /wheels . " in f"{build} ", build


@pytest.mark.parametrize(("path", "left_out"), [
    ("webhook/sandbox", True),
    ("webhook/sandbox/controlplane.py", True),
    ("webhook/simulation/traces.py", True),
    ("webhook/admission/__pycache__/engine.cpython-311.pyc", True),
    ("webhook/sandboxed.py", False),
    ("webhook/controller/shells/running.py", False),
    ("policies/10-classes.yaml", False),
    ("certs/tls.key", True),
])
def test_the_context_leaves_out_what_dockerignore_names(path: str, left_out: bool) -> None:
    assert ignored(path, ignore_patterns()) is left_out


def test_a_kept_exception_and_a_segment_wildcard_read_as_docker_reads_them() -> None:
    patterns = ["webhook/*/testdata", "**/*.md", "!docs/README.md"]
    assert ignored("webhook/policy/testdata/a.yaml", patterns)
    assert not ignored("webhook/policy/deep/testdata/a.yaml", patterns)
    assert ignored("docs/install.md", patterns)
    assert not ignored("docs/README.md", patterns)


def test_the_image_wheel_holds_the_webhook_and_controller_without_sandbox_or_simulation(
        wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    shipped = {Path(n).parent.as_posix() for n in names if n.endswith(".py")}
    assert not [n for n in names if n.startswith(tuple(f"{p}/" for p in LEFT_OUT))]
    # Every other package of webhook/ ships.
    packages = {p.parent.relative_to(ROOT).as_posix()
                for p in (ROOT / "webhook").rglob("__init__.py")}
    assert packages - shipped == set(LEFT_OUT)
    assert {"webhook/cli.py", "webhook/admission/serving.py",
            "webhook/controller/shells/running.py",
            "webhook/policy/defaults/10-classes.yaml",
            # The dashboard's page, script and style.
            *(f"webhook/controller/shells/dashboard/{f}" for f in (
                "index.html", "denied.html", "dashboard.js", "dashboard.css"))} <= set(names)


def run_unpacked(unpacked: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` run with the unpacked wheel's `webhook` first on the path, ahead of the
    checkout's, and the dependencies of .venv."""
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, "
                           f"{str(unpacked)!r}); {code}", *args], cwd=unpacked,
                          capture_output=True, text=True, timeout=120, check=False)


def test_every_module_of_the_image_imports_without_what_it_leaves_out(
        unpacked: Path) -> None:
    modules = sorted(".".join(p.relative_to(unpacked).with_suffix("").parts)
                     for p in (unpacked / "webhook").rglob("*.py")
                     if p.name not in ("__main__.py",))
    code = ("import importlib, webhook; "
            f"assert webhook.__file__.startswith({str(unpacked)!r}), webhook.__file__; "
            "[importlib.import_module(m) for m in sys.argv[1:]]")
    done = run_unpacked(unpacked, code, *modules)
    assert done.returncode == 0, done.stderr


AIRLOCK = "from webhook.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["controller", "--help"]])
def test_the_image_airlock_starts(unpacked: Path, args: list[str]) -> None:
    done = run_unpacked(unpacked, AIRLOCK, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ")


@pytest.mark.parametrize("args", [["sandbox", "up", "--demo"], ["sandbox", "status"],
                                  ["sandbox", "--help"], ["simulate", "--trace", "jobs.jsonl",
                                                          "-o", "json"],
                                  ["record", "--for", "1h"]])
def test_the_image_airlock_says_the_sandbox_and_simulation_are_not_installed(
        unpacked: Path, args: list[str]) -> None:
    done = run_unpacked(unpacked, AIRLOCK, *args)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"airlock {args[0]}: not in this installation. The container image holds only what "
        "the webhook and the controller run; run it from a checkout of Airlock "
        "(./scripts/setup.sh makes .venv/bin/airlock).\n")


def test_a_broken_install_is_not_taken_for_one_without_the_sandbox(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the package itself missing means it was left out: a module missing inside it
    (or a dependency it needs) fails as it would anywhere."""
    monkeypatch.setitem(sys.modules, "webhook.sandbox.options", None)
    with pytest.raises(ModuleNotFoundError) as raised:
        build_parser()
    assert raised.value.name == "webhook.sandbox.options"
