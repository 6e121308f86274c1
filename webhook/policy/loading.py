"""Finding and loading the policy files of a directory (or a list of files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from webhook.policy.merging import merge
from webhook.policy.model import Policy
from webhook.policy.sources import Document, PolicyError, Problem, read_documents

__all__ = ["PolicyError", "Problem", "load_policy", "policy_files"]


def policy_files(directory: Path) -> list[Path]:
    """The `*.yaml`/`*.yml` files directly in `directory`, in name order. Hidden entries
    are skipped: a mounted ConfigMap keeps its real files under `..data` and timestamped
    `..2025_...` directories, and shows each file as a link to them. So is the
    kustomization that turns the directory into that ConfigMap."""
    return sorted(
        p for p in directory.iterdir()
        if not p.name.startswith(".") and p.suffix in (".yaml", ".yml") and p.is_file()
        and p.stem != "kustomization"
    )


def load_policy(source: Path | Sequence[Path]) -> Policy:
    """The merged policy of a directory or of files; PolicyError with every problem."""
    if isinstance(source, Path):
        if not source.is_dir():
            raise PolicyError([Problem(str(source), 1, "no such policy directory")])
        files = policy_files(source)
        if not files:
            raise PolicyError([Problem(str(source), 1, "no policy files (*.yaml) here")])
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
    return merge(docs)
