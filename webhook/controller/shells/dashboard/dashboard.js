// The dashboard: poll /dashboard/state and draw it. Reads only; writes nothing but the
// browser's own cookie holding the token the 403 page's form was given.
"use strict";

const COOKIE = "airlock-dashboard-token";
const POLL_MS = 3000;
const HISTORY = 400;  // points kept per queue for the fair-share plot
const LETTER = { training: "T", inference: "I", scavenger: "S" };
const STROKES = ["#1d4ed8", "#9a3412", "#3f6212", "#6b21a8", "#111111", "#0e7490"];
const DASHES = ["", "6 3", "2 3", "8 3 2 3", "1 2", "10 4"];

// The tables' columns (the waiting gangs' depend on what the controller reports).
const COLUMNS = {
  queues: ["Queue", "Nominal", "Used", "Borrowed", "Weight", "Fair share (GPU-h)"],
  running: ["Gang", "Queue", "Class", "Pods", "GPUs", "Domain", "Started", "Expected end"],
  backfilled: ["Gang", "Queue", "Until", "Overran"],
  capacity: ["Gang", "Mode", "Pods", "GPUs", "State", "Age (s)"],
};

const history = new Map();  // queue -> [[time, share]]
let paused = false;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

function cell(value, numeric = false) {
  const text = value === null || value === undefined ? "unknown" : String(value);
  return el("td", numeric ? { class: "num" } : {}, text);
}

function head(id, names) {
  document.querySelector(`#${id} thead tr`).replaceChildren(
    ...names.map(h => el("th", { scope: "col" }, h)));
}

function fill(id, rows, empty) {
  const body = document.querySelector(`#${id} tbody`);
  const width = document.querySelectorAll(`#${id} thead th`).length;
  body.replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", { colspan: String(width) }, empty))]));
}

function share(q) { return q.share === null ? null : q.share / 3600; }

function drawQueues(queues) {
  fill("queues", queues.map(q => el("tr", {}, el("th", { scope: "row" }, q.name),
    cell(q.nominal, true), cell(q.used, true), cell(q.borrowed, true), cell(q.weight, true),
    el("td", { class: "num" }, share(q) === null ? "-" : share(q).toFixed(1)))), "(none)");
  const now = Date.now();
  for (const q of queues) {
    if (share(q) === null) continue;
    const points = history.get(q.name) || [];
    points.push([now, share(q)]);
    history.set(q.name, points.slice(-HISTORY));
  }
  drawHistory();
}

function drawHistory() {
  const svg = document.getElementById("history");
  const ns = "http://www.w3.org/2000/svg";
  svg.querySelectorAll("polyline, text").forEach(n => n.remove());
  const all = [...history.values()].flat();
  const legend = document.getElementById("history-legend");
  if (!all.length) { legend.replaceChildren(el("li", {}, "no fair share kept yet")); return; }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]), t0 + 1);
  const top = Math.max(...all.map(p => p[1]), 1e-9);
  const items = [];
  [...history.keys()].sort().forEach((name, i) => {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", history.get(name).map(([t, v]) =>
      `${10 + 580 * (t - t0) / (t1 - t0)},${150 - 125 * v / top}`).join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", STROKES[i % STROKES.length]);
    line.setAttribute("stroke-width", "2");
    if (DASHES[i % DASHES.length]) line.setAttribute("stroke-dasharray", DASHES[i % DASHES.length]);
    svg.append(line);
    const last = history.get(name).at(-1)[1];
    items.push(el("li", {}, `${name} (${["solid", "dashed", "dotted", "dash-dot", "fine dots", "long dashes"][i % 6]} line): ${last.toFixed(2)} GPU-h now`));
  });
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "12"); label.setAttribute("y", "14");
  label.textContent = `max ${top.toFixed(2)} GPU-h`;
  svg.append(label);
  legend.replaceChildren(...items);
}

function drawWaiting(waiting) {
  // Predicted starts and their blockers come from the controller when it makes them:
  // their columns show when any entry has them, "unknown" where one is null.
  const extra = [["predictedStart", "Predicted start"], ["predictionBlocker", "Blocker"]]
    .filter(([key]) => waiting.some(w => key in w));
  const heads = ["Gang", "Queue", "Priority", "Pods", "GPUs", "Reason", ...extra.map(e => e[1]), "Why"];
  head("waiting", heads);
  fill("waiting", waiting.map(w => el("tr", {}, el("th", { scope: "row" }, w.gang),
    cell(w.queue), cell(w.priority, true), cell(w.pods, true), cell(w.gpus, true),
    cell(w.reason), ...extra.map(([key]) => cell(w[key])), cell(w.why))), "(none)");
}

function drawRunning(running) {
  fill("running", running.map(r => el("tr", {}, el("th", { scope: "row" }, r.gang),
    cell(r.queue), cell(r.cls || "-"), cell(r.pods, true), cell(r.gpus, true),
    cell(r.domain || "-"), cell(r.started), cell(r.until))), "(none)");
}

function gpuTitle(g, i) {
  if (!g.pod) return `GPU ${i + 1}: free`;
  return `GPU ${i + 1}: ${g.pod}` + (g.unit ? `, ${g.unit}` : "") + `, ${g.cls || "not Airlock's"}`;
}

function held(cells) {
  const by = new Map();
  for (const g of cells) {
    if (!g.pod) continue;
    const key = `${g.unit || g.pod} (${g.cls || "not Airlock's"})`;
    by.set(key, (by.get(key) || 0) + 1);
  }
  return [...by].map(([k, n]) => `${k}: ${n} GPU${n === 1 ? "" : "s"}`).join("; ") || "-";
}

function drawMap(map) {
  document.getElementById("reservation").textContent = map.head
    ? `Kept for ${map.head}, the head of its queue: ${map.reserved} (nodes marked "kept").`
    : "No room is kept for a head of a queue.";
  const groups = map.groups.map((g, i) => {
    const name = g.domains.length ? g.domains.map(([l, v]) => `${l} ${v || "(none)"}`).join(" › ")
      : "all nodes";
    const title = el("h3", { id: `group-${i}` }, `${name}: ${g.free} of ${g.gpus} GPUs free`);
    const rows = g.nodes.map(n => {
      const gpus = el("td", {}, ...n.cells.map((c, j) => el("span", {
        class: `gpu ${c.pod ? (LETTER[c.cls] ? c.cls : "other") : "free"}`,
        title: gpuTitle(c, j), role: "img", "aria-label": gpuTitle(c, j),
      }, c.pod ? (LETTER[c.cls] || "?") : "")));
      const state = [n.ready ? "" : "not ready", n.cordoned ? "cordoned" : ""].filter(Boolean);
      const rowHead = el("th", { scope: "row", tabindex: "0" }, n.name);
      if (n.reserved) rowHead.append(" ", el("span", { class: "kept" }, "kept"));
      return el("tr", n.reserved ? { class: "reserved" } : {}, rowHead, gpus,
        cell(`${n.free} of ${n.gpus}`), cell(held(n.cells)), cell(state.join(", ") || "ready"));
    });
    const table = el("table", { "aria-labelledby": `group-${i}` },
      el("thead", {}, el("tr", {}, ...["Node", "GPUs", "Free", "Held by", "State"]
        .map(h => el("th", { scope: "col" }, h)))), el("tbody", {}, ...rows));
    return el("section", { class: "group" }, title, table);
  });
  document.getElementById("groups").replaceChildren(...(groups.length ? groups
    : [el("p", {}, "No node has GPUs.")]));
}

function draw(state) {
  drawQueues(state.queues);
  drawWaiting(state.waiting);
  drawRunning(state.clusterMap.running);
  fill("backfilled", state.backfilled.map(b => el("tr", {}, el("th", { scope: "row" }, b.gang),
    cell(b.queue), cell(b.until), cell(b.overran ? "yes" : "no"))), "(none)");
  fill("capacity", state.capacityRequests.map(c => el("tr", {}, el("th", { scope: "row" }, c.gang),
    cell(c.mode), cell(c.pods, true), cell(c.gpus, true), cell(c.state),
    cell(Math.round(c.age), true))), "(none)");
  drawMap(state.clusterMap);
}

async function poll() {
  const status = document.getElementById("status");
  if (!paused) {
    try {
      const response = await fetch("/dashboard/state", { cache: "no-store", credentials: "same-origin" });
      const body = await response.json();
      if (response.ok) {
        draw(body);
        status.textContent = `Updated ${body.at}; refreshes every ${POLL_MS / 1000} s.`;
      } else {
        status.textContent = `${response.status}: ${body.reason}`;
      }
    } catch (e) {
      status.textContent = `The controller did not answer (${e}); trying again.`;
    }
  }
  setTimeout(poll, POLL_MS);
}

function setToken(value) {
  document.cookie = `${COOKIE}=${value}; Path=/dashboard; Secure; SameSite=Strict` +
    (value ? "" : "; Max-Age=0");
}

function start() {
  const form = document.getElementById("token-form");
  if (form) {  // the 403 page
    form.addEventListener("submit", event => {
      event.preventDefault();
      const token = document.getElementById("token").value.trim();
      if (/^[A-Za-z0-9._~+\/=-]+$/.test(token)) { setToken(token); location.reload(); }
    });
    return;
  }
  for (const [id, names] of Object.entries(COLUMNS)) head(id, names);
  const pause = document.getElementById("pause");
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "Resume updates" : "Pause updates";
  });
  document.getElementById("forget").addEventListener("click", () => { setToken(""); location.reload(); });
  poll();
}

document.addEventListener("DOMContentLoaded", start);
