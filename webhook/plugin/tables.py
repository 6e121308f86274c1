"""`kubectl airlock queues`: each queue's quota, use and borrowing (and per GPU model,
where policy names models), with what waits in it, from the status report. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class QueueRow:
    # Fields spelt as the JSON spells them.
    name: str
    nominal: float
    used: float
    borrowed: float
    # None: the queue may borrow what others do not use, without limit.
    borrowingLimit: float | None
    weight: float
    waitingGangs: int
    waitingGpus: float


def queue_rows(status: Mapping[str, Any], limits: Mapping[str, float | None]
               ) -> list[QueueRow]:
    """One row per queue of the report, its borrowing limit from `limits` (by queue)."""
    rows = []
    for q in status.get("queues") or []:
        waits = [w for w in status.get("waiting") or [] if w.get("queue") == q["name"]]
        rows.append(QueueRow(q["name"], q["nominal"], q["used"], q["borrowed"],
                             limits.get(q["name"]), q["weight"], len(waits),
                             float(sum(w.get("gpus", 0) for w in waits))))
    return rows


def queues_json(rows: list[QueueRow], status: Mapping[str, Any]) -> dict[str, Any]:
    return {"queues": [asdict(r) for r in rows], "models": status.get("models") or [],
            "modelsWithoutNodes": status.get("modelsWithoutNodes") or []}


def queues_text(rows: list[QueueRow], status: Mapping[str, Any]) -> str:
    lines = ["QUEUE            NOMINAL  USED  BORROWED  LIMIT  WEIGHT  WAITING"]
    lines += [f"{r.name:<16} {r.nominal:>7g}  {r.used:>4g}  {r.borrowed:>8g}  "
              f"{'-' if r.borrowingLimit is None else f'{r.borrowingLimit:g}':>5}  "
              f"{r.weight:>6g}  {r.waitingGangs} ({r.waitingGpus:g} GPUs)" for r in rows]
    models = status.get("models") or []
    if models:
        lines += ["", "QUEUE            MODEL     NOMINAL  USED  BORROWED"]
        lines += [f"{m['queue']:<16} {m['model']:<8} {m['nominal']:>8g}  {m['used']:>4g}  "
                  f"{m['borrowed']:>8g}" for m in models]
    lines += [f"GPU model {m}: no node has its labels"
              for m in status.get("modelsWithoutNodes") or []]
    return "\n".join(lines) + "\n"
