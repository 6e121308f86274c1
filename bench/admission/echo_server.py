"""The baseline: a bare aiohttp + orjson endpoint that parses the review and allows it,
behind the same TLS setup as the webhook. It answers on both review paths and on the
webhook's readiness path, so the storm can wire it in where the webhook goes."""

from __future__ import annotations

import argparse
import ssl

import orjson
from aiohttp import web


async def mutate(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True}}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", required=True)
    args = parser.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(f"{args.cert_dir}/tls.crt", f"{args.cert_dir}/tls.key")
    app = web.Application(client_max_size=3 * 1024 * 1024)
    for path in ("/mutate", "/validate"):
        app.router.add_post(path, mutate)
    for path in ("/healthz", "/readyz"):
        app.router.add_get(path, healthz)
    web.run_app(app, host="127.0.0.1", port=args.port, ssl_context=ctx, print=None,
                access_log=None)


if __name__ == "__main__":
    main()
