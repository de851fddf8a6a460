// brokernet topology page: polls /status and draws brokers (nodes), bridges
// (edges, labelled with rate and state) and demand per destination. No external
// requests; every value from the status document is inserted as text, never as
// markup, since destination names and selectors come from the brokers.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const REFRESH_MS = 2000;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function ago(t) {
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 90) return Math.round(s) + "s";
  if (s < 5400) return Math.round(s / 60) + "m";
  if (s < 129600) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

function fmtRate(r) { return r >= 100 ? r.toFixed(0) : r.toFixed(1); }

// layout puts local brokers on the left and peers on an arc to the right.
function layout(nodes, w, h) {
  const pos = {};
  const locals = nodes.filter(n => n.role === "local");
  const peers = nodes.filter(n => n.role !== "local");
  locals.forEach((n, i) => { pos[n.addr] = { x: w * 0.22, y: h * (i + 1) / (locals.length + 1) }; });
  peers.forEach((n, i) => {
    const a = peers.length === 1 ? 0 : -Math.PI / 3 + (2 * Math.PI / 3) * i / (peers.length - 1);
    pos[n.addr] = { x: w * 0.22 + w * 0.55 * Math.cos(a), y: h / 2 + h * 0.4 * Math.sin(a) };
  });
  return pos;
}

function drawGraph(st) {
  const g = document.getElementById("graph");
  const w = g.clientWidth || 900, h = g.clientHeight || 380;
  g.setAttribute("viewBox", `0 0 ${w} ${h}`);
  g.replaceChildren();
  const defs = svg("defs");
  for (const cls of ["up", "down"]) {
    const m = svg("marker", { id: "arrow-" + cls, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" });
    m.appendChild(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: cls === "up" ? "#1f8a4c" : "#c0392b" }));
    defs.appendChild(m);
  }
  g.appendChild(defs);
  const pos = layout(st.nodes, w, h);
  const R = 38;
  // The two directions of a duplex pair are drawn side by side, each with its
  // label on its own side.
  const dirs = {};
  for (const b of st.bridges) dirs[b.local + "|" + b.remote] = true;
  for (const b of st.bridges) {
    const p = pos[b.local], q = pos[b.remote];
    if (!p || !q) continue;
    const dx = q.x - p.x, dy = q.y - p.y, len = Math.hypot(dx, dy) || 1;
    const ux = dx / len, uy = dy / len;
    const paired = dirs[b.remote + "|" + b.local];
    // Perpendicular to the direction: opposite directions get opposite sides.
    const off = paired ? 7 : 0;
    const ox = -uy * off, oy = ux * off;
    const cls = b.up ? "up" : "down";
    const e = svg("g", { class: "edge " + cls, "data-bridge": b.bridge });
    e.appendChild(svg("line", {
      x1: p.x + ux * R + ox, y1: p.y + uy * R + oy, x2: q.x - ux * (R + 2) + ox, y2: q.y - uy * (R + 2) + oy,
      "marker-end": `url(#arrow-${cls})`,
    }));
    const label = b.up ? `${fmtRate(b.forwarded_per_second)} msg/s · ${b.in_flight} in flight` : "down " + ago(b.since);
    const lx = -uy * (paired ? 16 : 10), ly = ux * (paired ? 16 : 10);
    e.appendChild(svg("text", { x: (p.x + q.x) / 2 + lx, y: (p.y + q.y) / 2 + ly + 4, "text-anchor": "middle" }, label));
    e.appendChild(svg("title", {}, b.bridge + (b.last_error ? "\n" + b.last_error : "")));
    g.appendChild(e);
  }
  for (const n of st.nodes) {
    const p = pos[n.addr];
    const e = svg("g", { class: "node " + n.role, "data-addr": n.addr });
    e.appendChild(svg("circle", { cx: p.x, cy: p.y, r: R }));
    const id = n.broker_id || "?";
    e.appendChild(svg("title", {}, id));
    e.appendChild(svg("text", { x: p.x, y: p.y - 2 }, id.length > 14 ? id.slice(0, 13) + "…" : id));
    e.appendChild(svg("text", { x: p.x, y: p.y + 12, class: "sub" }, n.role));
    e.appendChild(svg("text", { x: p.x, y: p.y + R + 15 }, n.addr));
    if (n.peer && n.peer !== n.addr && !n.peer.endsWith(n.addr)) {
      e.appendChild(svg("text", { x: p.x, y: p.y + R + 29, class: "sub" }, n.peer));
    }
    g.appendChild(e);
  }
}

function fillTable(id, rows, empty) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren();
  if (rows.length === 0) {
    const cols = document.querySelectorAll(`#${id} thead th`).length;
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: cols, class: "empty" }, empty));
    body.appendChild(tr);
    return;
  }
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) tr.appendChild(typeof c === "string" ? el("td", {}, c) : c);
    body.appendChild(tr);
  }
}

function render(st) {
  const up = st.bridges.filter(b => b.up).length;
  const sum = document.getElementById("summary");
  sum.textContent = `${up}/${st.bridges.length} bridges up · ${st.nodes.length} brokers · version ${st.version}`;
  sum.className = st.ready ? "good" : "bad";
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  drawGraph(st);
  fillTable("bridges", st.bridges.map(b => [
    b.bridge, b.peer,
    el("td", { class: b.up ? "state-up" : "state-down", title: b.last_error || "" }, b.up ? "up" : "down"),
    ago(b.since), fmtRate(b.forwarded_per_second), String(b.forwarded),
    `${b.in_flight}/${b.window}`, String(b.demand_subscriptions),
  ]), "no bridges");
  // One row per broker the demand is installed on: the route runs from the
  // consumers' broker (path[0]) through every hop to that broker.
  const demand = [];
  for (const b of st.bridges) {
    const at = b.local_id || b.local;
    for (const d of b.demand) {
      const path = d.path || [];
      demand.push([d.destination, at, path[0] || "", String(path.length), path.concat([at]).join(" → "), b.bridge,
        String(d.consumers.length), String(d.priority), d.active ? "yes" : "no",
        d.selector || (d.static ? "(static)" : d.replay ? "(replay)" : "")]);
    }
  }
  demand.sort((x, y) => x[0].localeCompare(y[0]) || Number(x[3]) - Number(y[3]) || x[1].localeCompare(y[1]));
  fillTable("demand", demand, "no demand");
  const stuck = document.getElementById("stuck");
  if (st.stuck.length === 0) {
    stuck.textContent = st.stuck_measured ? "none" : "not measured";
  } else {
    stuck.textContent = st.stuck.map(s => `${s.destination} on ${s.broker}: ${s.messages}`).join("; ") +
      (st.stuck_measured ? "" : " (not measured on every bridge)");
  }
}

async function refresh() {
  try {
    const r = await fetch("status", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
  } catch (e) {
    const sum = document.getElementById("summary");
    sum.textContent = "cannot read /status: " + e.message;
    sum.className = "bad";
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
