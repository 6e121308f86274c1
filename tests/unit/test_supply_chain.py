"""The image takes nothing it was not told to: its base named by digest, its dependencies
and its build backend installed from locks that pin each one with the hashes of its files,
and those locks what pyproject.toml asks for (the runtime dependencies, the build system), as
resolved in the environment the tests run in.

No network: the hashes themselves are checked against the index by
`python -m scripts.lock_image --check`, and by the image build (`--require-hashes`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from scripts.lock_image import (
    LOCK,
    LOCKS,
    Installed,
    Lock,
    LockError,
    Pin,
    read_lock,
    render,
    runtime_closure,
    runtime_requirements,
)
from tests.paths import DOCKERFILE

DIGEST = re.compile(r"[^\s@]+@sha256:[0-9a-f]{64}")


def base_images(dockerfile: str) -> list[str]:
    """The image each FROM starts from, ARG defaults substituted; a FROM of an earlier
    stage is that stage, not an image."""
    lines = [line.strip() for line in dockerfile.splitlines()]
    args = dict(line[4:].split("=", 1) for line in lines if line.startswith("ARG ")
                and "=" in line)
    stages: set[str] = set()
    images = []
    for line in lines:
        if not line.startswith("FROM "):
            continue
        words = [w for w in line.split()[1:] if not w.startswith("--")]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
        if image not in stages:
            images.append(image)
        if len(words) == 3 and words[1].upper() == "AS":
            stages.add(words[2])
    return images


def unpinned(dockerfile: str) -> list[str]:
    return [image for image in base_images(dockerfile) if not DIGEST.fullmatch(image)]


def test_every_base_image_is_named_by_digest() -> None:
    assert base_images(DOCKERFILE.read_text())
    assert unpinned(DOCKERFILE.read_text()) == []


def test_a_base_image_by_tag_alone_is_caught() -> None:
    digest = "sha256:" + "0" * 64
    dockerfile = (f"ARG BASE=python:3.11-slim-bookworm@{digest}\n"
                  "FROM ${BASE} AS build\nFROM build AS test\nFROM python:3.11-slim\n")
    assert unpinned(dockerfile) == ["python:3.11-slim"]
    assert base_images(dockerfile) == [f"python:3.11-slim-bookworm@{digest}",
                                       "python:3.11-slim"]


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    images = base_images(DOCKERFILE.read_text())
    assert len([line for line in lines if line.startswith("FROM ")]) >= 2, "multi-stage"
    for image in images:
        name, _, tag = image.partition("@")[0].partition(":")
        assert tag, image
        assert "latest" not in tag, image
        assert "slim" in tag or "distroless" in name, image
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users, "the runtime stage sets USER"
    # A numeric non-root UID: runAsNonRoot checks it.
    assert users[-1].split(":")[0] == "65532"
    entry = next(line for line in lines if line.startswith("ENTRYPOINT"))
    assert json.loads(entry.split(None, 1)[1]) == ["airlock"]


def test_the_locks_are_installed_hash_checked_and_without_dependencies() -> None:
    dockerfile = DOCKERFILE.read_text()
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    for lock in LOCKS:
        assert f"COPY deploy/image/{lock.path.name} " in dockerfile, lock.path.name
        assert any(lock.path.name in line for line in installs), lock.path.name
    locked = [line for line in installs if ".lock" in line]
    assert all("--require-hashes" in line for line in locked), locked
    # Nothing comes in transitively, from the locks or with Airlock's own wheel.
    assert all("--no-deps" in line for line in installs), installs


def test_the_wheel_is_built_with_the_locked_backend_alone() -> None:
    (build,) = [line for line in DOCKERFILE.read_text().splitlines() if "pip wheel" in line]
    assert "/opt/build/bin/python -m pip wheel --no-build-isolation" in build, build


# --- the locks -----------------------------------------------------------------------------

@pytest.fixture(scope="module", params=LOCKS, ids=lambda lock: lock.path.name)
def lock(request: pytest.FixtureRequest) -> Lock:
    chosen: Lock = request.param
    return chosen


@pytest.fixture(scope="module")
def pins(lock: Lock) -> dict[NormalizedName, Pin]:
    return {pin.key: pin for pin in read_lock(lock.path.read_text())}


@pytest.fixture(scope="module")
def closure(lock: Lock) -> dict[NormalizedName, Installed]:
    return runtime_closure(lock.requirements())


def test_every_pin_carries_hashes(pins: Mapping[NormalizedName, Pin]) -> None:
    assert pins
    assert all(pin.hashes for pin in pins.values())


@pytest.mark.parametrize("line", [
    "aiohttp==3.14.5",  # no hash
    "aiohttp>=3.9 --hash=sha256:" + "a" * 64,  # not pinned
    "aiohttp==3.14.5 --hash=md5:" + "a" * 32,  # not sha256
    "aiohttp==3.14.5 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --no-binary=:all:",
])
def test_a_pin_without_sha256_hashes_is_refused(line: str) -> None:
    with pytest.raises(LockError):
        read_lock(line + "\n")


def test_the_lock_is_as_the_script_writes_it(lock: Lock) -> None:
    # Sorted, with its header and one hash a line: a hand edit shows.
    text = lock.path.read_text()
    assert render(read_lock(text), lock.header) == text, "run `python -m scripts.lock_image`"


def drift(pins: Mapping[NormalizedName, Pin],
          closure: Mapping[NormalizedName, Installed]) -> tuple[list[str], list[str]]:
    """What the image needs that the lock lacks, and what the lock has that nothing needs."""
    return (sorted(node.name for key, node in closure.items() if key not in pins),
            sorted(pin.name for key, pin in pins.items() if key not in closure))


def test_the_lock_pins_exactly_what_pyproject_needs(
        pins: Mapping[NormalizedName, Pin],
        closure: Mapping[NormalizedName, Installed]) -> None:
    missing, unneeded = drift(pins, closure)
    assert not missing, f"the image lacks {missing}: python -m scripts.lock_image --from-env"
    assert not unneeded, f"nothing needs {unneeded}: python -m scripts.lock_image --from-env"


def test_the_tests_run_the_versions_the_image_ships(
        pins: Mapping[NormalizedName, Pin],
        closure: Mapping[NormalizedName, Installed]) -> None:
    # scripts/setup.sh installs .venv with the lock's versions as constraints.
    differ = [f"{pin.name}: the lock has {pin.version}, .venv {closure[key].version}"
              for key, pin in pins.items() if key in closure
              and closure[key].version != pin.version]
    assert differ == [], "run ./scripts/setup.sh"


@pytest.fixture(scope="module")
def runtime_pins() -> dict[NormalizedName, Pin]:
    return {pin.key: pin for pin in read_lock(LOCK.read_text())}


def test_a_new_dependency_is_caught(runtime_pins: Mapping[NormalizedName, Pin]) -> None:
    # pytest is installed here (and needs pluggy, iniconfig...) but is no runtime dependency.
    grown = runtime_closure([*runtime_requirements(), Requirement("pytest")])
    missing, unneeded = drift(runtime_pins, grown)
    assert "pytest" in missing
    assert "pluggy" in missing
    assert unneeded == []


def unmet(pins: Mapping[NormalizedName, Pin],
          closure: Mapping[NormalizedName, Installed]) -> list[str]:
    """The specifiers on locked versions that they fail: pyproject.toml's own, and those of
    each dependent whose locked version is the one installed here (only its metadata is at
    hand; `pip check` in the image build covers the rest)."""
    failed = []
    for key, pin in pins.items():
        node = closure.get(key)
        for (asker, asker_version), specifier in (node.wanted if node else {}).items():
            locked = pins.get(canonicalize_name(asker))
            described = asker == "gpu-airlock" or (locked and locked.version == asker_version)
            if described and not specifier.contains(Version(pin.version), prereleases=True):
                failed.append(f"{asker} {asker_version} wants {pin.name}{specifier}, "
                              f"the lock has {pin.version}")
    return failed


def test_locked_versions_meet_every_requirement_on_them(
        pins: Mapping[NormalizedName, Pin],
        closure: Mapping[NormalizedName, Installed]) -> None:
    assert unmet(pins, closure) == []


def test_a_raised_floor_is_caught(runtime_pins: Mapping[NormalizedName, Pin]) -> None:
    raised = [Requirement("aiohttp>=99") if r.name == "aiohttp" else r
              for r in runtime_requirements()]
    locked = runtime_pins[canonicalize_name("aiohttp")].version
    assert unmet(runtime_pins, runtime_closure(raised)) == [
        f"gpu-airlock pyproject.toml wants aiohttp>=99, the lock has {locked}"]
