"""Rebuild the image's two locks: deploy/image/requirements.lock, its runtime dependencies,
and deploy/image/build.lock, the build backend that makes Airlock's wheel in its build stage.
Each package is pinned to one version with the sha256 of every file pip may choose for the
image (CPython 3.11 on Debian bookworm, linux x86_64 and aarch64), so that
`pip install --require-hashes` there installs exactly the files that were locked, or nothing.

    .venv/bin/python -m scripts.lock_image             # hash again the versions the locks pin
    .venv/bin/python -m scripts.lock_image --from-env  # pin what this environment has installed
    .venv/bin/python -m scripts.lock_image --check     # exit 1 if the index disagrees with them

The hashes come from the package index's JSON API (PEP 691): `--index-url`, else
$PIP_INDEX_URL, else PyPI. What the image needs comes from pyproject.toml (`dependencies`,
and `requires` of `[build-system]`) and the metadata of what is installed here;
tests/unit/test_supply_chain.py checks the locks against both without the network.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tomllib
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution
from itertools import chain
from pathlib import Path

import orjson
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "deploy" / "image" / "requirements.lock"
BUILD_LOCK = ROOT / "deploy" / "image" / "build.lock"
PYPROJECT = ROOT / "pyproject.toml"

# What the Dockerfile's base image runs: python:3.11-slim-bookworm, whose glibc is 2.36.
IMAGE_PYTHON = (3, 11)
IMAGE_GLIBC_MINOR = 36
IMAGE_MACHINES = ("x86_64", "aarch64")

HEADER = """\
# The image's runtime dependencies, installed by the Dockerfile with
# `pip install --require-hashes --no-deps`: each pinned, with the sha256 of every file pip
# may choose for the image (CPython 3.11 on Debian bookworm, linux x86_64 and aarch64; an
# sdist only where a platform has no wheel).
# Generated from the package index by scripts/lock_image.py; do not edit by hand:
#   .venv/bin/python -m scripts.lock_image             # hash again the versions pinned here
#   .venv/bin/python -m scripts.lock_image --from-env  # pin what .venv has installed
#   .venv/bin/python -m scripts.lock_image --check     # does the index still serve these?
# tests/unit/test_supply_chain.py fails when its packages are not those pyproject.toml
# needs (as .venv resolves them), or a version misses a requirement on it.
"""

BUILD_HEADER = """\
# The image's build backend: what `pip wheel --no-build-isolation` builds Airlock's wheel
# with in the Dockerfile's build stage, installed there with
# `pip install --require-hashes --no-deps`; nothing of it reaches the runtime stage.
# scripts/setup.sh installs the same version in .venv, so the tests build the wheel as the
# image does.
# Generated from the package index by scripts/lock_image.py, with
# deploy/image/requirements.lock; do not edit by hand.
# tests/unit/test_supply_chain.py fails when its packages are not those pyproject.toml's
# [build-system] requires (as .venv resolves them), or a version misses a requirement on it.
"""

_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)")


@dataclass(frozen=True, slots=True)
class Pin:
    name: str  # as written in the lock
    version: str
    hashes: tuple[str, ...] = ()

    @property
    def key(self) -> NormalizedName:
        return canonicalize_name(self.name)


class LockError(ValueError):
    pass


def read_lock(text: str, hashes_required: bool = True) -> list[Pin]:
    """The lock's pins; a line that is not `name==version` followed by sha256 hashes is an
    error, as pip in hash-checking mode would make it (unless `hashes_required` is false:
    a lock being hashed for the first time)."""
    pins = []
    for number, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        pin = _PIN.fullmatch(words[0])
        hashes = [_HASH.fullmatch(w) for w in words[1:]]
        if pin is None or not all(hashes) or (hashes_required and not hashes):
            raise LockError(f"logical line {number}: not `name==version --hash=sha256:...`: "
                            f"{line.strip()}")
        pins.append(Pin(pin[1], pin[2], tuple(h[1] for h in hashes if h)))
    return pins


def render(pins: Iterable[Pin], header: str = HEADER) -> str:
    entries = []
    for pin in sorted(pins, key=lambda p: p.key):
        lines = [f"{pin.name}=={pin.version}", *(f"--hash=sha256:{h}" for h in pin.hashes)]
        entries.append(" \\\n    ".join(lines))
    return header + "\n".join(entries) + "\n"


# --- what the image needs, from pyproject.toml and what is installed here ----------------

def marker_environments() -> list[dict[str, str]]:
    """The environment markers of the image, once per machine it is built for."""
    version = ".".join(map(str, IMAGE_PYTHON))
    return [{"python_version": version, "python_full_version": version,
             "implementation_name": "cpython", "platform_python_implementation": "CPython",
             "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
             "platform_machine": machine} for machine in IMAGE_MACHINES]


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """From pyproject.toml itself: an editable install's metadata is only as recent as the
    last `pip install -e`."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return [Requirement(spec) for spec in project["dependencies"]]


def build_requirements(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """What building the wheel needs: pyproject.toml's `[build-system]`."""
    build_system = tomllib.loads(pyproject.read_text())["build-system"]
    return [Requirement(spec) for spec in build_system["requires"]]


@dataclass(frozen=True, slots=True)
class Lock:
    """One lock the Dockerfile installs: its file, the header that says what it is for,
    and the requirements whose closure it pins."""

    path: Path
    header: str
    requirements: Callable[[], list[Requirement]]


LOCKS = (Lock(LOCK, HEADER, runtime_requirements),
         Lock(BUILD_LOCK, BUILD_HEADER, build_requirements))


def _applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({**env, "extra": extra})
                                 for env in marker_environments()
                                 for extra in {"", *extras})


@dataclass(slots=True)
class Installed:
    """One distribution the image needs: the version installed here (None when it is not),
    and what each dependent asks of it (the dependent's name and installed version)."""
    name: str
    version: str | None
    wanted: dict[tuple[str, str], SpecifierSet] = field(default_factory=dict)


def runtime_closure(roots: Sequence[Requirement], root: str = "gpu-airlock",
                    root_version: str = "pyproject.toml") -> dict[NormalizedName, Installed]:
    """Every distribution the roots need on the image, walked through the metadata of what
    is installed here (markers evaluated for the image, extras followed)."""
    closure: dict[NormalizedName, Installed] = {}
    followed: set[tuple[NormalizedName, frozenset[str]]] = set()
    todo = [((root, root_version), r) for r in roots]
    while todo:
        asker, requirement = todo.pop()
        key = canonicalize_name(requirement.name)
        node = closure.get(key)
        if node is None:
            try:
                dist = distribution(requirement.name)
                node = Installed(dist.metadata["Name"], dist.version)
            except PackageNotFoundError:
                node = Installed(requirement.name, None)
            closure[key] = node
        node.wanted[asker] = requirement.specifier
        extras = frozenset(requirement.extras)
        if node.version is None or (key, extras) in followed:
            continue
        followed.add((key, extras))
        for spec in distribution(node.name).requires or []:
            dependency = Requirement(spec)
            if _applies(dependency, extras):
                todo.append(((node.name, node.version), dependency))
    return closure


# --- what the index serves ---------------------------------------------------------------

def image_tags(machine: str) -> frozenset[Tag]:
    """The wheel tags pip accepts on the image for one machine: every manylinux_2_x up to
    bookworm's glibc, and the legacy aliases wheels are still published under."""
    platforms = [f"manylinux_2_{minor}_{machine}"
                 for minor in range(IMAGE_GLIBC_MINOR, 4, -1)]
    platforms += [f"{alias}_{machine}" for alias in
                  ("manylinux2014", "manylinux2010", "manylinux1", "linux")]
    return frozenset(chain(cpython_tags(IMAGE_PYTHON, platforms=platforms),
                           compatible_tags(IMAGE_PYTHON, "cp311", platforms=platforms)))


@dataclass(frozen=True, slots=True)
class IndexFile:
    filename: str
    sha256: str


def index_url(given: str | None = None) -> str:
    return (given or os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")


def served(name: str, version: str, index: str) -> list[IndexFile]:
    """The files the index serves for one version of one project, with their sha256."""
    request = urllib.request.Request(f"{index}/{canonicalize_name(name)}/", headers={
        "Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        if "json" not in response.headers.get("Content-Type", ""):
            raise LockError(f"{index} does not serve the JSON simple API (PEP 691)")
        project = orjson.loads(response.read())
    wanted = Version(version)
    files = []
    for entry in project["files"]:
        filename, sha256 = entry["filename"], entry["hashes"].get("sha256")
        try:
            if filename.endswith(".whl"):
                file_version = parse_wheel_filename(filename)[1]
            else:
                file_version = parse_sdist_filename(filename)[1]
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue  # eggs, installers and other files pip never installs
        if file_version == wanted and sha256:
            files.append(IndexFile(filename, sha256))
    return files


def choose(name: str, files: Sequence[IndexFile]) -> list[IndexFile]:
    """The files pip may pick on the image: each wheel that fits one of its machines, and
    the sdists when some machine has no wheel (pip would build it there)."""
    wheels = {f: parse_wheel_filename(f.filename)[3] for f in files
              if f.filename.endswith(".whl")}
    chosen: set[IndexFile] = set()
    need_sdist = False
    for machine in IMAGE_MACHINES:
        fitting = [f for f, tags in wheels.items() if tags & image_tags(machine)]
        chosen.update(fitting)
        need_sdist |= not fitting
    if need_sdist:
        sdists = [f for f in files if f not in wheels]
        if not sdists:
            raise LockError(f"{name}: no wheel for every image platform, and no sdist")
        chosen.update(sdists)
    return sorted(chosen, key=lambda f: f.filename)


def hashed(pins: Iterable[Pin], index: str) -> list[Pin]:
    return [Pin(pin.name, pin.version,
                tuple(sorted(f.sha256 for f in choose(pin.name,
                                                      served(pin.name, pin.version, index)))))
            for pin in pins]


def pins_from_environment(closure: Mapping[NormalizedName, Installed]) -> list[Pin]:
    missing = sorted(node.name for node in closure.values() if node.version is None)
    if missing:
        raise LockError(f"not installed here, so no version to pin: {', '.join(missing)}")
    return [Pin(node.name, node.version) for node in closure.values() if node.version]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.lock_image",
                                     description="Pin and hash the image's dependencies and "
                                                 "its build backend.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-env", action="store_true",
                        help="pin the versions installed here instead of the locks'")
    source.add_argument("--check", action="store_true",
                        help="rewrite nothing; exit 1 if the index disagrees with a lock")
    parser.add_argument("--index-url", help="a PEP 691 simple index (default: "
                        "$PIP_INDEX_URL, else PyPI)")
    args = parser.parse_args(argv)
    texts: dict[Path, tuple[str, int]] = {}
    try:
        for lock in LOCKS:
            if args.from_env:
                pins = pins_from_environment(runtime_closure(lock.requirements()))
            else:
                pins = read_lock(lock.path.read_text(), hashes_required=False)
            texts[lock.path] = (render(hashed(pins, index_url(args.index_url)), lock.header),
                                len(pins))
    except (LockError, OSError) as e:
        print(f"lock_image: {e}", file=sys.stderr)
        return 1
    if args.check:
        stale = [path for path, (text, _) in texts.items() if text != path.read_text()]
        for path in stale:
            print(f"lock_image: {path} differs from what the index serves; run "
                  "`python -m scripts.lock_image` and review the diff", file=sys.stderr)
        if not stale:
            print("every pin's hashes match the index")
        return 1 if stale else 0
    for path, (text, count) in texts.items():
        path.write_text(text)
        print(f"wrote {path} ({count} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
