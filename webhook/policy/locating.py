"""Which policy directory a command reads when the command line names none: ./policies
in a checkout, else the default policy shipped inside the package. In a checkout
webhook/policy/defaults is a link to the repository's policies/, which stays the one
source; a built package holds copies of its files (pyproject.toml's package-data)."""

from __future__ import annotations

from pathlib import Path

from webhook.policy.sources import PolicyError, Problem

WORKING_DIRECTORY_POLICIES = Path("policies")
PACKAGED_POLICIES = Path(__file__).resolve().parent / "defaults"


def locate_policies(given: Path | None) -> tuple[Path, str | None]:
    """The directory to read and, when it is the shipped default, a note saying so;
    PolicyError when `given` does not exist."""
    if given is not None:
        if not given.exists():
            raise PolicyError([Problem(str(given), None, "no such file or directory")])
        return given, None
    if WORKING_DIRECTORY_POLICIES.is_dir():
        return WORKING_DIRECTORY_POLICIES, None
    return PACKAGED_POLICIES, (f"no --policies given and no ./policies here: using the "
                               f"default policy shipped with Airlock ({PACKAGED_POLICIES})")
