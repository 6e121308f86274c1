"""Verdicts remembered for a while, so that a scrape every 15 s costs the apiserver a
TokenReview and a SubjectAccessReview once a minute, not twice a scrape.

Keyed by a digest of the token, never the token: the cache holds nothing a reader of the
process's memory could replay. Bounded, least recently used first out, so tokens made up
by anyone who reaches the port cannot grow it. Only verdicts are kept; a review that
failed (the apiserver slow or away) is asked again next time."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from webhook.metricsauth.verdicts import Verdict

# A role granted or taken away takes effect within this long.
TTL_SECONDS = 60.0
# A few scrapers (Prometheus' replicas, a person with curl) use a few tokens each.
MAX_ENTRIES = 256


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Verdicts:
    def __init__(self, ttl: float = TTL_SECONDS, size: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._kept: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, token: str) -> Verdict | None:
        key = token_key(token)
        kept = self._kept.get(key)
        if kept is None:
            return None
        expires, verdict = kept
        if self.clock() >= expires:
            del self._kept[key]
            return None
        self._kept.move_to_end(key)
        return verdict

    def put(self, token: str, verdict: Verdict) -> None:
        key = token_key(token)
        self._kept[key] = (self.clock() + self.ttl, verdict)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
