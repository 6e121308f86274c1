"""The `airlock` command line as tests run it. Unit tests run `main(argv)` in this process,
with its working directory, standard input and output as a shell would give them, read
back as the exit code and the two streams. What `python -m webhook` adds
(`sys.exit(main())`) is tested where processes are started: `airlock_command` is that
process's argv, `run_airlock` runs one to its end."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from tests.paths import ROOT
from webhook.cli import main


class Done(NamedTuple):
    """What a finished command left: the fields a `subprocess.CompletedProcess` has."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def airlock(*args: str, cwd: Path = ROOT, stdin: str = "") -> Done:
    """`airlock ARGS` run in `cwd` (default: the checkout, which has its ./policies)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(_stdin(stdin))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's usage errors, as the shell would see them
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    return Done(code, out.getvalue(), err.getvalue())


def airlock_command(*args: str) -> list[str]:
    """The argv of `airlock ARGS` in a process of its own. The interpreter running the
    tests, not the `airlock` script on PATH: that may be another installation's."""
    return [sys.executable, "-m", "webhook", *args]


def run_airlock(*args: str, cwd: Path = ROOT, timeout: float = 180,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`airlock ARGS` run to its end in a process of its own, in `cwd`; the exit code is
    the caller's to check. `env` is added to this process's environment."""
    return subprocess.run(airlock_command(*args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env},
                          check=False)


def installed_airlock() -> Path | None:
    """The installed `airlock` script, for shell scripts that call it by path: the one
    next to this interpreter, else the first on PATH."""
    candidate = Path(sys.executable).parent / "airlock"
    found = candidate if candidate.exists() else shutil.which("airlock")
    return Path(found) if found else None
