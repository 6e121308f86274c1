"""The `airlock` command line as unit tests run it: `main(argv)` in this process, with its
working directory, standard input and output as a shell would give them, read back as
the exit code and the two streams. What `python -m webhook` adds (`sys.exit(main())`) is
tested where processes are started (tests/server/test_process.py)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from webhook.cli import main

ROOT = Path(__file__).resolve().parents[1]


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
