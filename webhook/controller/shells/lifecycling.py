"""The lifecycle log (`core.lifecycle`): a JSON line per event under its own logger, so a
log pipeline can keep it apart from the rest for weeks, and `airlock record --from-log`
reads it back."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from webhook.controller.core.lifecycle import LIFECYCLE_LOGGER, LifeEvent

log = logging.getLogger(LIFECYCLE_LOGGER)


def tell(events: Iterable[LifeEvent]) -> None:
    for event in events:
        log.info(event.event, extra=event.fields())
