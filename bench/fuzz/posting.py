"""What the webhook fuzz posts, and how each answer is judged: the posts hypothesis draws
(reviews of honest and hostile pods, odd reviews, malformed bodies, paths not served),
sent by sender threads over keep-alive HTTPS connections, and each answer checked (its
status, a well-formed review answering the uid, a patch that applies, a re-mutation that
patches nothing) and tallied, with the first bodies that showed each failure."""

from __future__ import annotations

import base64
import http.client
import queue
import ssl
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from hypothesis import strategies as st

from tests.strategies import (
    FAILED,
    PatchError,
    answer_problem,
    hostile_pods,
    malformed_bodies,
    odd_reviews,
    patched,
    reviews,
)
from webhook.admission.decoding import MAX_BODY

PROGRESS_EVERY = 10_000
KEPT_FAILURES = 20
MUTATE, VALIDATE = "/mutate", "/validate"
# Reviews of each kind a sender keeps, to send again alone once the fuzz is over.
REPLAYED = 500
# Paths the webhook does not serve, or not for POST: 404 or 405, nothing else.
ODD_PATHS = ("/", "/mutate/", "/mutatex", "/MUTATE", "/validate/pods", "/readyz", "/healthz",
             "/metrics")
HEADERS = {"Content-Type": "application/json"}
# What is counted; any of FAILING fails the run.
CONNECTION_ERRORS, MALFORMED = "connection errors", "malformed answers"
NOT_APPLYING, PATCHED_AGAIN = "patches that do not apply", "re-mutations that patch again"
SERVER_ERRORS, BENCH_ERRORS = "5xx (HTTP, or the review's status.code)", \
    "errors of the bench itself"
FAILING = (SERVER_ERRORS, CONNECTION_ERRORS, MALFORMED, NOT_APPLYING, PATCHED_AGAIN,
           BENCH_ERRORS)
PATCHES, REQUESTS = "patches applied", "requests"


class Post(NamedTuple):
    kind: str  # review, hostile review, odd review, malformed body, unknown path
    path: str
    body: bytes
    review: dict[str, Any] | None  # the review whose answer is checked in full


# Reviews of pods 17 times in 20 (hostile ones 3 of those), odd reviews, malformed bodies
# and unknown paths once each (hypothesis favours the first: about 90% reviews of pods in
# the end).
REVIEW, HOSTILE = "review", "hostile review"
_kinds = st.sampled_from((REVIEW,) * 14 + (HOSTILE,) * 3
                         + ("odd review", "malformed body", "unknown path"))
_endpoints = st.sampled_from((MUTATE, VALIDATE))
_odd_paths = st.sampled_from(ODD_PATHS)
_reviews, _odd_reviews = reviews(), odd_reviews()
_hostile_reviews = reviews(hostile_pods())


@st.composite
def posts(draw: st.DrawFn) -> Post:
    kind = draw(_kinds)
    if kind in (REVIEW, HOSTILE):
        review = draw(_reviews if kind == REVIEW else _hostile_reviews)
        return Post(kind, draw(_endpoints), orjson.dumps(review), review)
    if kind == "odd review":
        return Post(kind, draw(_endpoints), orjson.dumps(draw(_odd_reviews)), None)
    if kind == "malformed body":
        return Post(kind, draw(_endpoints), draw(malformed_bodies), None)
    return Post(kind, draw(_odd_paths), orjson.dumps(draw(_reviews)), None)


def _by_kind() -> dict[str, list[Any]]:
    return {REVIEW: [], HOSTILE: []}


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    # Seconds from sending a review of a pod to reading its answer, by the post's kind;
    # and the first reviews of each kind, sent again one at a time once the fuzz is over.
    seconds: dict[str, list[float]] = field(default_factory=_by_kind)
    kept: dict[str, list[Post]] = field(default_factory=_by_kind)

    def fail(self, post: Post, counted: str, why: str, path: str | None = None,
             body: bytes | None = None) -> None:
        """Count a failure, and keep the first few bodies that showed it."""
        self.counts[counted] += 1
        if len(self.failures) < KEPT_FAILURES:
            sent = post.body if body is None else body
            try:
                shown = {"body": sent.decode()}
            except UnicodeDecodeError:
                shown = {"bodyBase64": base64.b64encode(sent).decode()}
            self.failures.append({"what": counted, "why": why, "path": path or post.path,
                                  **shown})

    def add(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.failures.extend(other.failures[:KEPT_FAILURES - len(self.failures)])
        for kind, seconds in other.seconds.items():
            self.seconds[kind].extend(seconds)
            self.kept[kind].extend(other.kept[kind])


class Connection:
    """One keep-alive HTTPS connection to the webhook; after an error, the next request
    opens a new one."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=context,
                                                timeout=30)

    def post(self, path: str, body: bytes) -> tuple[int, bytes] | str:
        """The answer's status and body, or why there was none."""
        try:
            self.conn.request("POST", path, body=body, headers=HEADERS)
            response = self.conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            return f"{type(e).__name__}: {e}"

    def close(self) -> None:
        self.conn.close()


def _answer(conn: Connection, post: Post, tally: Tally, path: str | None = None,
            body: bytes | None = None) -> tuple[int, bytes] | None:
    """The answer to the post (or to `path` and `body` instead), counted; None when
    there was none or it was a 5xx."""
    tally.counts[REQUESTS] += 1
    answer = conn.post(path or post.path, post.body if body is None else body)
    if isinstance(answer, str):
        tally.fail(post, CONNECTION_ERRORS, answer, path, body)
        return None
    status, text = answer
    tally.counts[f"{status // 100}xx"] += 1
    if status >= 500:
        tally.fail(post, SERVER_ERRORS, f"HTTP {status}: {text[:300]!r}", path, body)
        return None
    return answer


def _problem(post: Post, status: int, body: bytes, tally: Tally, uid: str | None,
             resent: bytes | None = None) -> bool:
    """Whether the answer is wrong (and counted): the webhook's own error inside a 200
    counts as a 5xx, like an HTTP one."""
    problem = answer_problem(status, body, uid)
    if problem is not None:
        tally.fail(post, SERVER_ERRORS if problem.startswith(FAILED) else MALFORMED, problem,
                   body=resent)
    return problem is not None


def _remutated(conn: Connection, post: Post, review: dict[str, Any], new: Any,
               tally: Tally) -> None:
    """The patched pod sent again, as the apiserver does when it reinvokes the webhook:
    it must need no further patch. What is kept is the first review, which reproduces
    it."""
    again = orjson.dumps({**review, "request": {**review["request"], "object": new}})
    answer = _answer(conn, post, tally, MUTATE, again)
    if answer is None or _problem(post, *answer, tally, review["request"]["uid"], again):
        return
    response = orjson.loads(answer[1])["response"] if answer[0] == 200 else {}
    if "patch" in response:
        second = base64.b64decode(response["patch"]).decode()
        tally.fail(post, PATCHED_AGAIN, f"the patched pod is patched again: {second}")


def _check(conn: Connection, post: Post, tally: Tally) -> None:
    started = time.perf_counter()
    answer = _answer(conn, post, tally)
    if post.kind in tally.seconds:
        tally.seconds[post.kind].append(time.perf_counter() - started)
        if len(tally.kept[post.kind]) < REPLAYED:
            tally.kept[post.kind].append(post)
    if answer is None:
        return
    status, body = answer
    if post.kind == "unknown path":
        if status not in (404, 405):
            tally.fail(post, MALFORMED, f"HTTP {status} for a path not served")
        return
    review = post.review
    wrong = _problem(post, status, body, tally, review["request"]["uid"] if review else None)
    if wrong or review is None or status != 200 or post.path != MUTATE:
        return
    try:
        new = patched(review["request"]["object"], body)
    except PatchError as e:
        tally.fail(post, NOT_APPLYING, str(e))
        return
    if new is not None:
        tally.counts[PATCHES] += 1
        _remutated(conn, post, review, new, tally)


class Progress:
    """Reviews sent over the whole run, a line on stderr every PROGRESS_EVERY."""

    def __init__(self, total: int) -> None:
        self.total, self.sent, self.started = total, 0, time.monotonic()
        self.lock = threading.Lock()

    def tick(self) -> None:
        with self.lock:
            self.sent += 1
            if self.sent % PROGRESS_EVERY == 0:
                seconds = time.monotonic() - self.started
                print(f"{self.sent:,}/{self.total:,} reviews, {seconds:.0f} s, "
                      f"{self.sent / seconds:.0f}/s", file=sys.stderr, flush=True)


def sender(port: int, context: ssl.SSLContext, work: queue.Queue[Post | None],
            tally: Tally, progress: Progress) -> None:
    conn = Connection(port, context)
    try:
        for post in iter(work.get, None):
            tally.counts[f"sent: {post.kind} {post.path}"] += 1
            try:
                _check(conn, post, tally)
            except Exception as e:  # the bench's own bug: counted, and the run goes on
                traceback.print_exc()
                tally.fail(post, BENCH_ERRORS, f"{type(e).__name__}: {e}")
            progress.tick()
    finally:
        conn.close()


def send_oversized(port: int, context: ssl.SSLContext, tally: Tally) -> None:
    """A body over the size limit, on a connection of its own (the server may close it
    before reading it all): a 400, like any body it cannot read."""
    post = Post("oversized body", MUTATE, b"[" * (MAX_BODY + 1), None)
    tally.counts[f"sent: {post.kind} {post.path}"] += 1
    conn = Connection(port, context)
    try:
        answer = _answer(conn, post, tally)
    finally:
        conn.close()
    if answer is not None and answer[0] != 400:
        tally.fail(post, MALFORMED, f"HTTP {answer[0]} for an oversized body",
                   body=b"(MAX_BODY + 1 bytes of [)")


def answers_ready(port: int, context: ssl.SSLContext) -> bool:
    """Whether /readyz answers 200: the policy loaded, the certificate good, not draining."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def send_alone(port: int, context: ssl.SSLContext, sent: list[Post]) -> list[float]:
    """Each post sent again, one at a time on one connection, with nothing else drawn or
    sent meanwhile: the latency of the review itself, not of the bench's own contention
    (hypothesis draws in the same process as the senders)."""
    conn = Connection(port, context)
    seconds = []
    try:
        for post in sent:
            started = time.perf_counter()
            if not isinstance(conn.post(post.path, post.body), str):
                seconds.append(time.perf_counter() - started)
    finally:
        conn.close()
    return seconds
