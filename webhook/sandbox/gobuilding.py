"""Go programs built from their modules at pinned versions, cached outside the repository.

A `GoTool` names the modules it is built from (each at a pinned version) and the main
packages to compile. The build makes a small module of its own that requires them and
carries over their `replace` directives, which Go ignores in a module that is only
required (a tool may send those that pin an unserved version to a served one); it then
compiles each command and stamps each binary with the recipe that made it. A cached
binary is reused only while its stamp matches, so changing a version, an override or the
flags rebuilds it; a file lock makes concurrent callers wait for one build.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    pass


def cache_root() -> Path:
    base = os.environ.get("AIRLOCK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "airlock")
    return Path(base)


@dataclass(frozen=True, slots=True)
class GoModule:
    short: str  # names the module in the cache directory and the recipe, e.g. "kwok"
    path: str
    version: str
    # An upstream replace that points into the upstream repository itself (Kubernetes'
    # `k8s.io/api => ./staging/src/k8s.io/api`) cannot be followed from the module cache.
    # With a nested version the replaced module is taken at that published version (for
    # Kubernetes, whose go.mod requires its staging modules at v0.0.0); without, such a
    # replace is dropped and the version the module requires stands (etcd's siblings).
    nested_version: str | None = None
    # An upstream replace to a version the proxy does not serve is taken at the version
    # this maps it to: {"v0.34.7": "v0.34.4"} sends every `X => Y v0.34.7` to `Y v0.34.4`
    # (scheduler-plugins pins Kubernetes' modules to patch releases the proxy lacks).
    replace_versions: Mapping[str, str] = field(default_factory=dict)

    @property
    def overrides(self) -> str:
        """The recipe's words for `replace_versions` (none when there are none)."""
        pairs = ",".join(f"{old}=>{new}" for old, new in sorted(self.replace_versions.items()))
        return f" {self.short} replaces {pairs}" if pairs else ""


@dataclass(frozen=True, slots=True)
class GoTool:
    """What to build: `commands` maps each binary's name to its main package."""

    modules: tuple[GoModule, ...]
    commands: Mapping[str, str]
    ldflags: str = "-s -w"
    # Said when Go is missing: another way to get the binaries, if there is one.
    without_go: str = ""
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return " ".join(f"{m.short} {m.version}" for m in self.modules)

    @property
    def directory(self) -> Path:
        return cache_root() / self.label.replace(" ", "-")

    @property
    def bin_dir(self) -> Path:
        return self.directory / "bin"

    @property
    def log(self) -> Path:
        return self.directory / "build.log"

    @property
    def recipe(self) -> str:
        overrides = "".join(m.overrides for m in self.modules)
        return f"{self.label}{overrides} ldflags {self.ldflags}"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def cached(self, name: str) -> bool:
        try:
            stamp = (self.bin_dir / f".{name}.recipe").read_text()
        except OSError:
            return False
        return stamp == self.recipe and os.access(self.binary(name), os.X_OK)


def ensure(tool: GoTool, progress: Progress = print,
           names: list[str] | None = None) -> dict[str, Path]:
    """The tool's binaries (all, or `names`), built unless the cache has them."""
    wanted = list(tool.commands) if names is None else names
    if any(not tool.cached(n) for n in wanted):
        with _lock(tool, progress):
            # Another process may have built them while this one waited for the lock.
            missing = [n for n in wanted if not tool.cached(n)]
            if missing:
                _build(tool, missing, progress)
    return {n: tool.binary(n) for n in wanted}


@contextlib.contextmanager
def _lock(tool: GoTool, progress: Progress) -> Iterator[None]:
    """One build per tool at a time: two would share its module directory and each
    spend minutes of every core."""
    path = tool.directory / "build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build of {tool.label} to finish ({path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Build:
    def __init__(self, tool: GoTool, names: list[str], progress: Progress) -> None:
        go = shutil.which("go")
        if go is None:
            raise BuildError(
                f"Go is needed to build {', '.join(names)} ({tool.label}), and `go` is not "
                "on PATH. Install Go 1.21 or newer (https://go.dev/dl/; it fetches the "
                f"toolchain version the build needs by itself){tool.without_go}.")
        self.go, self.tool, self.names, self.progress = go, tool, names, progress
        self.env = {**os.environ, "GOWORK": "off", **tool.env}

    def run(self, args: list[str], cwd: Path, what: str) -> str:
        """Run a go command, its output going to the build log and, but for downloads,
        to `progress`; a heartbeat says it is alive through long silent compiles."""
        start = time.monotonic()
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(30):
                self.progress(f"  ... still {what} ({time.monotonic() - start:.0f}s)")

        threading.Thread(target=heartbeat, daemon=True).start()
        lines: list[str] = []
        stdout: list[str] = []
        try:
            with self.tool.log.open("a") as log:
                log.write(f"$ go {' '.join(args)}\n")
                proc = subprocess.Popen([self.go, *args], cwd=cwd, env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
                out, err = proc.stdout, proc.stderr
                assert out is not None
                assert err is not None
                # stdout (JSON to parse) is read aside, so neither pipe fills up.
                reader = threading.Thread(target=lambda: stdout.append(out.read()))
                reader.start()
                for line in err:
                    log.write(line)
                    if not line.startswith("go: downloading"):
                        lines.append(line.rstrip())
                        self.progress(f"  {line.rstrip()}")
                proc.wait()
                reader.join()
        finally:
            done.set()
        if proc.returncode != 0:
            # `go mod download -json` reports its errors on stdout, in the JSON.
            tail = "\n".join(lines[-20:]) or "".join(stdout)[-2000:].strip()
            with self.tool.log.open("a") as log:
                log.write("".join(stdout))
            raise BuildError(f"building {', '.join(self.names)} ({self.tool.label}) failed "
                             f"while {what}; full log: {self.tool.log}\n{tail}")
        return "".join(stdout)

    def upstream(self, module: GoModule) -> dict[str, Any]:
        """The module's own go.mod, as `go mod edit -json` reads it."""
        info = json.loads(self.run(["mod", "download", "-json",
                                    f"{module.path}@{module.version}"],
                                   self.tool.directory, f"downloading {module.path}"))
        parsed: dict[str, Any] = json.loads(self.run(
            ["mod", "edit", "-json", info["GoMod"]], self.tool.directory,
            f"reading {module.path}'s go.mod"))
        return parsed

    def go_mod(self) -> str:
        go_version = "1.21"
        replaces: dict[str, str] = {}
        for module in self.tool.modules:
            upstream = self.upstream(module)
            go_version = max(go_version, str(upstream.get("Go") or "1.21"), key=_go_order)
            for replace in upstream.get("Replace") or []:
                old, new = replace["Old"], replace["New"]
                if old["Path"] in replaces:
                    continue  # the first module that replaces a path decides it
                lhs = f"{old['Path']} {old['Version']}" if old.get("Version") else old["Path"]
                if new.get("Version"):
                    version = module.replace_versions.get(new["Version"], new["Version"])
                    replaces[old["Path"]] = f"{lhs} => {new['Path']} {version}"
                elif module.nested_version:
                    replaces[old["Path"]] = f"{lhs} => {old['Path']} {module.nested_version}"
        name = "airlock.local/build/" + self.tool.label.replace(" ", "-")
        lines = [f"module {name}", "", f"go {go_version}", "", "require ("]
        lines += [f"\t{m.path} {m.version}" for m in self.tool.modules]
        lines += [")", ""]
        lines += [f"replace {r}" for r in replaces.values()]
        return "\n".join(lines) + "\n"

    def build(self) -> None:
        tool = self.tool
        module = tool.directory / "module"
        module.mkdir(parents=True, exist_ok=True)
        tool.log.write_text("")
        started = time.monotonic()
        self.progress(f"building {', '.join(self.names)} from {tool.label} (first run only; "
                      f"minutes on 2 cores) into {tool.bin_dir}; log {tool.log}")
        (module / "go.mod").write_text(self.go_mod())
        imports = "\n".join(f'\t_ "{pkg}"' for pkg in tool.commands.values())
        (module / "tools.go").write_text(
            f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")
        self.run(["mod", "tidy"], module, "resolving modules")
        # Build into a scratch directory and move into place, so an interrupted build is
        # never mistaken for a finished one.
        scratch = tool.directory / f"bin.partial-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        for name in self.names:
            self.progress(f"  compiling {name}")
            self.run(["build", "-trimpath", f"-ldflags={tool.ldflags}", "-o",
                      str(scratch / name), tool.commands[name]], module, f"compiling {name}")
        tool.bin_dir.mkdir(exist_ok=True)
        for name in self.names:
            os.replace(scratch / name, tool.binary(name))
            # The stamp comes last: a binary without it is rebuilt.
            (tool.bin_dir / f".{name}.recipe").write_text(tool.recipe)
        scratch.rmdir()
        self.progress(f"built {', '.join(self.names)} in {time.monotonic() - started:.0f}s")


def _go_order(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _build(tool: GoTool, names: list[str], progress: Progress) -> None:
    _Build(tool, names, progress).build()

