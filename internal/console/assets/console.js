// Scribe console: the live parts of the pages. Everything shown is set with
// textContent (never innerHTML), so event fields cannot inject markup.
"use strict";

function cell(tr, text) {
  const td = document.createElement("td");
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function followFeed(onEvent, onTick) {
  const es = new EventSource("/live");
  es.addEventListener("event", (m) => onEvent && onEvent(JSON.parse(m.data)));
  es.addEventListener("tick", (m) => onTick && onTick(JSON.parse(m.data)));
  return es;
}

function overview() {
  const feed = document.querySelector("#feed tbody");
  const rate = document.querySelector("#rate polyline");
  if (!feed || !rate) return;
  const points = [];
  const head = document.getElementById("head");
  const seen = document.getElementById("seen");
  followFeed((e) => {
    const tr = document.createElement("tr");
    tr.className = "fresh";
    const pos = document.createElement("a");
    pos.href = "/events/" + encodeURIComponent(e.id);
    pos.textContent = e.position;
    const td = document.createElement("td");
    td.appendChild(pos);
    tr.appendChild(td);
    cell(tr, new Date(e.recordedAt).toISOString());
    cell(tr, e.type);
    cell(tr, (e.tags || []).join(", ") || "-");
    feed.insertBefore(tr, feed.firstChild);
    while (feed.children.length > 20) feed.removeChild(feed.lastChild);
    head.textContent = e.position;
  }, (t) => {
    points.push(t.events);
    while (points.length > 120) points.shift();
    seen.textContent = t.seen;
    const peak = Math.max(0, ...points);
    const top = niceCeil(peak);
    rate.setAttribute("points", series(points, top));
    scale("rate", top, (v) => v + "/s");
    document.getElementById("rate-top").textContent = "peak " + peak + "/s, now " + t.events + "/s";
    document.getElementById("rate").setAttribute("aria-label", "events per second, now " + t.events + ", peak " + peak);
    drawLags(t);
  });
}

// niceCeil rounds v up to a readable top of scale (1, 1.5, 2, 3, 4, 5, 6 or 8
// times a power of ten, at least 1), so that the chart's labels are round.
function niceCeil(v) {
  if (!(v > 1)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 3, 4, 5, 6, 8, 10]) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// scale labels the chart id's top and middle lines, for a scale from 0 to
// top; format(v, top) may pick its unit by top, so both labels share it.
function scale(id, top, format) {
  document.getElementById(id + "-ymax").textContent = format(top, top);
  document.getElementById(id + "-ymid").textContent = format(top / 2, top);
}

// seconds formats a lag for a scale up to top: in seconds up to two
// minutes, then in minutes, then in hours.
function seconds(v, top) {
  if (top < 120) return +v.toFixed(1) + " s";
  if (top < 7200) return +(v / 60).toFixed(2) + " min";
  return +(v / 3600).toFixed(2) + " h";
}

// series maps the newest 120 values to polyline points: one per second, the
// newest at the right edge, scaled so that top touches the chart's top.
function series(values, top) {
  const n = values.length;
  return values.map((v, i) => {
    const x = 600 - ((n - 1 - i) * 600) / 119;
    const y = 115 - (110 * v) / top;
    return x.toFixed(1) + "," + y.toFixed(1);
  }).join(" ");
}

const lagSeries = new Map();
const palette = ["#2a62c9", "#b3261e", "#1f7a3d", "#a05a00", "#6a3fb5", "#00838f"];

// drawLags adds a tick's projection lags to their series and redraws one
// line per projection, scaled to the largest lag shown.
function drawLags(t) {
  const svg = document.getElementById("lag");
  const legend = document.getElementById("lag-legend");
  if (!svg) return;
  for (const l of t.lags || []) {
    if (!lagSeries.has(l.name)) lagSeries.set(l.name, []);
    const s = lagSeries.get(l.name);
    s.push(l.seconds);
    while (s.length > 120) s.shift();
  }
  let peak = 0;
  for (const s of lagSeries.values()) peak = Math.max(peak, ...s);
  const top = niceCeil(peak);
  scale("lag", top, seconds);
  for (const old of svg.querySelectorAll("polyline")) old.remove();
  legend.textContent = "";
  let i = 0;
  for (const [name, s] of lagSeries) {
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("stroke", palette[i % palette.length]);
    line.setAttribute("points", series(s, top));
    svg.appendChild(line);
    const key = document.createElement("span");
    key.className = "key";
    key.dataset.color = String(i % palette.length);
    key.textContent = name + ": " + s[s.length - 1].toFixed(1) + " s  ";
    legend.appendChild(key);
    i++;
  }
  if (lagSeries.size === 0) legend.textContent = "no projection";
}

function streamPage() {
  const live = document.getElementById("stream-live");
  if (!live) return;
  const tag = live.dataset.tag, partition = live.dataset.partition;
  const version = document.getElementById("stream-version");
  followFeed((e) => {
    if (e.partition !== partition || !(e.tags || []).includes(tag)) return;
    const p = document.createElement("p");
    p.className = "fresh";
    const a = document.createElement("a");
    a.href = "/events/" + encodeURIComponent(e.id);
    a.textContent = "new event " + e.type + " at position " + e.position;
    p.appendChild(a);
    live.insertBefore(p, live.firstChild);
    version.textContent = String(Number(version.textContent) + 1);
  });
}

function verifyPage() {
  const form = document.getElementById("verify-form");
  if (!form) return;
  const bar = document.getElementById("verify-progress");
  const status = document.getElementById("verify-status");
  const broke = document.getElementById("verify-break");
  let es = null;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (es) es.close();
    broke.hidden = true;
    status.textContent = "verifying…";
    const q = new URLSearchParams(new FormData(form));
    es = new EventSource("/verify/run?" + q.toString());
    es.addEventListener("progress", (m) => {
      const p = JSON.parse(m.data);
      bar.max = Math.max(1, p.total);
      bar.value = p.done;
      status.textContent = p.done + " of " + p.total + " chains, " + p.events + " events verified, " + p.broken + " broken" + (p.finished ? " (finished)" : "");
      if (p.break) {
        broke.hidden = false;
        broke.textContent = "first broken link: " + p.break.stream + " at version " + p.break.version + " (position " + p.break.position + "): " + p.break.reason;
      }
      if (p.error) {
        broke.hidden = false;
        broke.textContent = "verification failed: " + p.error;
      }
      if (p.finished) {
        es.close();
        status.dataset.finished = "true";
      }
    });
  });
  if (new URLSearchParams(location.search).get("run") === "1") form.requestSubmit();
}

document.addEventListener("DOMContentLoaded", () => { overview(); streamPage(); verifyPage(); });
