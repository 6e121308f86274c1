"""The policy in use, reloaded when its files change, keeping the last good one.

A ConfigMap edit reaches a mounted directory as a swap of its `..data` link; polling
the files' stamps (webhook.fingerprints) notices it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from webhook.fingerprints import Fingerprint, Stamp, fingerprint
from webhook.policy.loading import load_policy, policy_files
from webhook.policy.model import Policy
from webhook.policy.sources import PolicyError

log = logging.getLogger("airlock.policy")

Outcome = Literal["unchanged", "reloaded", "failed"]


def _fingerprint(directory: Path) -> Fingerprint:
    """The stamps of the files the loader would read (an unlistable directory is a stamp
    of its own, so the loader gets to say why)."""
    try:
        return fingerprint(policy_files(directory))
    except PolicyError as e:
        return (Stamp(str(directory), "", 0, 0, str(e)),)


class PolicyStore:
    """The current good policy of a directory. `policy` is None until one has loaded;
    `last_error` holds why the newest files were rejected (None once they load)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.policy: Policy | None = None
        self.last_error: str | None = None
        self.failed_at: float | None = None
        self._seen: Fingerprint | None = None

    def reload_if_changed(self) -> Outcome:
        seen = _fingerprint(self.directory)
        if seen == self._seen:
            return "unchanged"
        # Remembered before parsing: a broken edit is reported once, not on every poll.
        self._seen = seen
        try:
            policy = load_policy(self.directory)
        except PolicyError as e:
            self.last_error, self.failed_at = str(e), time.time()
            log.error("policy rejected; keeping the last good one" if self.policy
                      else "policy rejected; no policy loaded",
                      extra={"directory": str(self.directory),
                             "problems": [str(p) for p in e.problems]})
            return "failed"
        self.policy = policy
        self.last_error = self.failed_at = None
        log.info("policy loaded", extra={"directory": str(self.directory),
                                         "files": list(policy.sources),
                                         "rules": len(policy.rules)})
        return "reloaded"

    async def watch(self, interval: float,
                    on_outcome: Callable[[Outcome], None] | None = None) -> None:
        """Poll every `interval` seconds until cancelled; `on_outcome` sees each result
        other than "unchanged" (e.g. to count reloads)."""
        while True:
            outcome = self.reload_if_changed()
            if on_outcome is not None and outcome != "unchanged":
                on_outcome(outcome)
            await asyncio.sleep(interval)
