"""The policy in use, reloaded when its files change, keeping the last good one.

A ConfigMap edit reaches a mounted directory as a swap of its `..data` link: the
resolved paths and times of the files change together. Polling that fingerprint is
cheap and cannot miss the swap the way a lost inotify watch can.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal

from webhook.policy.loading import load_policy, policy_files
from webhook.policy.model import Policy
from webhook.policy.sources import PolicyError

log = logging.getLogger("airlock.policy")

Outcome = Literal["unchanged", "reloaded", "failed"]
Fingerprint = tuple[tuple[str, int, int], ...]


def fingerprint(directory: Path) -> Fingerprint:
    try:
        out = []
        for p in policy_files(directory):
            resolved = p.resolve(strict=True)
            st = resolved.stat()
            out.append((str(resolved), st.st_mtime_ns, st.st_size))
        return tuple(out)
    except OSError:
        return ()


class PolicyStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.policy: Policy | None = None
        self.last_error: str | None = None
        self.loaded_at: float | None = None
        self._seen: Fingerprint | None = None

    def reload_if_changed(self) -> Outcome:
        seen = fingerprint(self.directory)
        if seen == self._seen:
            return "unchanged"
        self._seen = seen
        try:
            policy = load_policy(self.directory)
        except PolicyError as e:
            self.last_error = str(e)
            log.error("policy rejected; keeping the last good one" if self.policy
                      else "policy rejected; no policy loaded",
                      extra={"directory": str(self.directory), "problems": str(e)})
            return "failed"
        self.policy, self.last_error, self.loaded_at = policy, None, time.time()
        log.info("policy loaded", extra={"directory": str(self.directory),
                                         "files": list(policy.sources),
                                         "rules": len(policy.rules)})
        return "reloaded"
