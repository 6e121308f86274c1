"""What changed on disk, cheaply: each file's resolved path, mtime and size.

A mounted Secret or ConfigMap is updated by the kubelet swapping its `..data` link, so the
resolved paths and times of its files change together. Polling these stamps cannot miss
the swap the way a lost inotify watch can, and costs no parsing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


class Stamp(NamedTuple):
    name: str
    resolved: str
    mtime_ns: int
    size: int
    # Why the file cannot be read (then the other fields are empty), or None.
    problem: str | None = None


Fingerprint = tuple[Stamp, ...]


def fingerprint(paths: Iterable[Path]) -> Fingerprint:
    """A stamp per path, in the order given. An unreadable file gets a stamp that says
    why, so the fingerprint still changes and the reader gets to report it."""
    out = []
    for path in paths:
        try:
            resolved = path.resolve(strict=True)
            st = resolved.stat()
        except OSError as e:
            out.append(Stamp(path.name, "", 0, 0, e.strerror or str(e)))
            continue
        out.append(Stamp(path.name, str(resolved), st.st_mtime_ns, st.st_size))
    return tuple(out)
