"""`/metrics` behind the reviews, for an aiohttp handler; and the webhook's reviewer,
made from its command line (the controller reuses its own client)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import hdrs, web

from webhook.metricsauth.options import Mode
from webhook.reach import credentials

if TYPE_CHECKING:
    from webhook.metricsauth.reviewing import Reviewer
    from webhook.metricsauth.verdicts import Verdict

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
# What a caller the reviewer refused is answered.
Refusal = Callable[["Verdict"], web.StreamResponse]


def refusal(verdict: Verdict) -> web.StreamResponse:
    """The status and the reason as text, a 401 with the Bearer challenge."""
    headers = {hdrs.WWW_AUTHENTICATE: 'Bearer realm="airlock"'} \
        if verdict.status == 401 else None
    return web.Response(status=verdict.status, text=verdict.reason + "\n", headers=headers)


def guarded(handler: Handler, reviewer: Reviewer | None, refuse: Refusal = refusal,
            cookie: str | None = None) -> Handler:
    """`handler`, answering only callers the reviewer allows; `handler` itself when
    there is no reviewer (`--metrics-auth none`). With `cookie`, a request without an
    `Authorization` header may carry its bearer token in that cookie (a browser's)."""
    if reviewer is None:
        return handler

    async def checked(request: web.BaseRequest) -> web.StreamResponse:
        authorization = request.headers.get(hdrs.AUTHORIZATION)
        if authorization is None and cookie is not None and (
                token := request.cookies.get(cookie)):
            authorization = f"Bearer {token}"
        verdict = await reviewer.verdict(authorization)
        if not verdict.allowed:
            return refuse(verdict)
        return await handler(request)

    return checked


async def open_reviewer(mode: Mode, kubeconfig: Path | None) -> Reviewer | None:
    """A reviewer with a client of its own (closed with it), or None for `none`. The
    Kubernetes client is imported here, not with the module: the admission server needs
    it for nothing else."""
    if mode == "none":
        return None
    from webhook import kubeclient
    from webhook.metricsauth.reviewing import IN_FLIGHT, reviewer_for

    configuration = await credentials(
        kubeconfig, "--metrics-auth kubernetes reviews scrapers' tokens",
        "--metrics-auth none")
    return reviewer_for(kubeclient.api_client(configuration, in_flight=IN_FLIGHT), own=True)
