"""One round: build the queues' state, decide, record. The controller, `airlock simulate`
and `airlock status` all run their rounds through `Rounds`, so what one decides the
others do too; they differ only in where the cluster and the clock come from, and in
what they do with the actions (apply them, replay them, show them).

`Rounds` keeps what the queues remember between rounds (`accounting.Accounts`): the fair
share, evictions (for the requeue backoff), gangs short of members, the budgets; and the
last round as it ended, which `predict` plays forward (`forecasting`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from webhook.controller.core.actions import Action
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import DecideOptions, decided
from webhook.controller.core.forecasting import Prediction, forecast
from webhook.controller.core.gangs import SizeAnswer
from webhook.controller.core.identities import UnitId
from webhook.controller.core.queues.accounting import Accounts
from webhook.controller.core.round import Round
from webhook.policy.model import Policy


class Rounds:
    def __init__(self, options: DecideOptions | None = None) -> None:
        self.options = options or DecideOptions()
        self.accounts = Accounts()
        self._last: tuple[Round, list[Action]] | None = None

    def run(self, policy: Policy, cluster: Tracked, now: float,
            sizes: Mapping[UnitId, SizeAnswer] | None = None,
            deleted: frozenset[str] = frozenset(),
            awaiting: frozenset[UnitId] = frozenset()) -> list[Action]:
        """The actions of a round at `now`, with the gangs' `sizes` their owners state,
        the uids this controller `deleted` that the watch may not show gone yet, and the
        units `awaiting` the room they asked for; admissions and evictions are
        remembered for the rounds after."""
        state = dataclasses.replace(self.accounts.state(policy, cluster, now, deleted),
                                    awaiting=awaiting)
        actions, r = decided(cluster, sizes or {}, now, self.options, state)
        self._last = r, actions
        self.accounts.record(policy, cluster.accelerators, actions, now)
        return actions

    def predict(self) -> dict[UnitId, Prediction]:
        """When each unit the last round left waiting is expected to start. Asked before
        the tracked cluster changes: the forecast reads it as that round saw it."""
        return {} if self._last is None else forecast(*self._last)

    def preview(self, policy: Policy, cluster: Tracked, now: float) -> list[Action]:
        """What a round would do now, remembering nothing, and with preemption as it
        will be once the policy's delay has passed: what `airlock status` shows (and
        `predict` then plays forward)."""
        state = self.accounts.state(policy, cluster, now)
        state = dataclasses.replace(state, preemption=dataclasses.replace(
            state.preemption, enabled=policy.preemption.enabled, delay=0.0))
        actions, r = decided(cluster, {}, now, self.options, state)
        self._last = r, actions
        return actions
