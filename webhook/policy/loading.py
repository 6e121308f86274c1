"""Finding and loading the policy files of a directory (or a list of files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from webhook.policy.merging import merge
from webhook.policy.model import Policy
from webhook.policy.sources import Document, PolicyError, Problem, read_documents

__all__ = ["PolicyError", "Problem", "load_policy", "policy_files"]

_SUFFIXES = (".yaml", ".yml")


def policy_files(directory: Path) -> list[Path]:
    """The `*.yaml`/`*.yml` files directly in `directory`, in name order; PolicyError if
    the directory cannot be listed.

    Hidden entries are skipped: a mounted ConfigMap keeps its real files under `..data`
    and timestamped `..2025_...` directories and shows each file as a link into them, so
    only the links count. Subdirectories (such as `examples/`) are not read. Neither is
    the kustomization that turns the directory into that ConfigMap."""
    try:
        entries = list(directory.iterdir())
    except OSError as e:
        raise PolicyError([Problem(str(directory), None,
                                   f"cannot list policy directory: {e.strerror}")]) from None
    return sorted(
        p for p in entries
        if not p.name.startswith(".") and p.suffix in _SUFFIXES and p.stem != "kustomization"
        and p.is_file()
    )


def load_policy(source: Path | Sequence[Path]) -> Policy:
    """The merged policy of a directory, or of files in the order given; PolicyError with
    every problem found."""
    if isinstance(source, Path):
        files = policy_files(source)
        if not files:
            raise PolicyError([Problem(str(source), None,
                                       "no policy files (*.yaml, *.yml) in the directory")])
    else:
        files = list(source)
    docs: list[Document] = []
    problems: list[Problem] = []
    for f in files:
        try:
            docs.extend(read_documents(f))
        except PolicyError as e:
            problems.extend(e.problems)
    if problems:
        raise PolicyError(problems)
    if not docs:
        raise PolicyError([Problem(", ".join(map(str, files)), None,
                                   "the policy files hold no documents")])
    return merge(docs)
