// berth console: one page per hash (#fleet, #jobs, #waits, #decisions,
// #health). Each page polls its JSON endpoint with If-None-Match, so an
// unchanged answer costs a 304 and no redraw. The server aggregates the
// series; zooming a chart asks it again for the zoomed range.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const $ = (s) => document.querySelector(s);
  const H = 3600, D = 86400;
  const state = { page: "", timer: 0, etags: {}, range: { fleet: null, waits: null }, span: { fleet: D, waits: D },
    charts: {}, log: null, jobFilter: { state: "", source: "" } };

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function ts(t) { return t ? new Date(t).toISOString().replace("T", " ").slice(0, 19) : ""; }
  // dur shows seconds for reading: 412ms, 4.2s, 75s, 12m, 3.5h, 2.0d. A
  // wait under a second is not 0s.
  function dur(s) {
    if (s == null) return "";
    if (s < 1) return Math.round(s * 1000) + "ms";
    if (s < 10) return s.toFixed(1) + "s";
    s = Math.round(s);
    if (s < 120) return s + "s";
    if (s < 7200) return Math.round(s / 60) + "m";
    if (s < 2 * D) return (s / H).toFixed(1) + "h";
    return (s / D).toFixed(1) + "d";
  }

  // get fetches url and calls fn with its JSON only when it changed.
  async function get(url, fn) {
    const headers = {};
    if (state.etags[url]) headers["If-None-Match"] = state.etags[url];
    const r = await fetch(url, { headers, cache: "no-store", credentials: "same-origin" });
    if (r.status === 401) { location.href = "/ui/login" + location.hash; return; }
    if (r.status === 304) return;
    if (!r.ok) { throw new Error(url + ": " + r.status + " " + (await r.text())); }
    state.etags[url] = r.headers.get("ETag");
    fn(await r.json());
  }

  function rangeQuery(name) {
    const now = Math.floor(Date.now() / 1000);
    const r = state.range[name] || { from: now - state.span[name], to: now };
    return "from=" + Math.floor(r.from) + "&to=" + Math.ceil(r.to);
  }

  // rangeButtons draws 1h/24h/7d buttons; a click ends any zoom.
  function rangeButtons(name, redraw) {
    const box = document.querySelector('.ranges[data-chart="' + name + '"]');
    if (box.childElementCount) return;
    for (const [label, s] of [["1 h", H], ["24 h", D], ["7 d", 7 * D]]) {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = label; b.dataset.span = s;
      b.className = s === state.span[name] ? "on" : "";
      b.onclick = () => {
        state.span[name] = s; state.range[name] = null;
        box.querySelectorAll("button").forEach((x) => x.className = Number(x.dataset.span) === s ? "on" : "");
        redraw();
      };
      box.appendChild(b);
    }
  }

  // timeRange returns the x range of a time chart: its data's first to
  // last time, pad either side (a bar's half width). For a lone point
  // uPlot 1.6.32 adds 86400/1e-3 seconds (a day counted in milliseconds,
  // on a scale in seconds), so a chart of one hour's data ran from 2026 to
  // 2029; a lone point gets half an hour either side, or pad if wider.
  function timeRange(pad) {
    return (u) => {
      const xs = u.data[0];
      if (!xs || !xs.length) { const now = Date.now() / 1000; return [now - H, now]; }
      const lo = xs[0], hi = xs[xs.length - 1], p = lo === hi ? Math.max(pad, H / 2) : pad;
      return [lo - p, hi + p];
    };
  }

  // chart draws (or redraws) a uPlot chart; dragging a range zooms by
  // asking the server for it.
  function chart(id, name, series, data, opts) {
    const el = document.getElementById(id);
    const old = state.charts[id];
    if (old && old._key === JSON.stringify(series.map((s) => s.label))) { old.setData(data); return; }
    if (old) old.destroy();
    const width = Math.max(400, el.clientWidth || 900);
    const o = Object.assign({
      width, height: 240, series: [{}].concat(series),
      axes: [{}, { size: 60 }],
      scales: { x: { time: true, range: timeRange(0) } },
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: {
        setSelect: [(u) => {
          if (!name || u.select.width < 5) return;
          const from = u.posToVal(u.select.left, "x"), to = u.posToVal(u.select.left + u.select.width, "x");
          state.range[name] = { from, to };
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          refresh();
        }],
      },
    }, opts || {});
    // The axis titles, the x domain and the x values drawn, for the
    // browser tests: uPlot draws them on canvas.
    el.dataset.axes = o.axes.map((a) => a.label || "").join("|");
    o.hooks.draw = [(u) => {
      el.dataset.xmin = u.scales.x.min; el.dataset.xmax = u.scales.x.max;
      el.dataset.drawn = u.data[0].filter((x, i) => u.data.some((d, k) => k > 0 && d[i] != null)).join(" ");
    }];
    const u = new uPlot(o, data, el);
    u._key = JSON.stringify(series.map((s) => s.label));
    if (name) u.over.addEventListener("dblclick", () => { state.range[name] = null; refresh(); });
    state.charts[id] = u;
  }

  const colors = { hot: "#2e7d32", booting: "#f9a825", suspended: "#1565c0", deleting: "#9e9e9e" };

  function fleet() {
    rangeButtons("fleet", refresh);
    return get("/ui/api/fleet?" + rangeQuery("fleet"), (d) => {
      $("#fleet-now").innerHTML = Object.entries(d.now).map(([k, v]) => '<span id="now-' + k + '">' + esc(k) + ": <b>" + v + "</b></span>").join("") +
        '<span class="phases">' + esc(Object.entries(d.phases).sort().map(([k, v]) => k + " " + v).join(" · ") || "no instances") + "</span>";
      const s = d.series;
      const names = ["hot", "booting", "suspended", "deleting"];
      const series = names.map((n) => ({ label: n, stroke: colors[n], width: 2, spanGaps: false }));
      series.push({ label: "hot (max)", stroke: colors.hot, dash: [4, 4], width: 1 });
      chart("chart-fleet", "fleet", series, [s.t].concat(names.map((n) => s.avg[n])).concat([s.max.hot]),
        { axes: [{ label: "time" }, { size: 60, label: "instances" }] });
      $("#instances tbody").innerHTML = d.instances.map((i) => "<tr id=\"inst-" + esc(i.id) + "\"><td>" + esc(i.id) + "</td><td>" + esc(i.phase) +
        "</td><td>" + esc(Object.entries(i.slots).map(([k, v]) => k + " " + v).join(", ")) + '</td><td class="num">' + i.uses +
        '</td><td class="num">' + dur((Date.now() - Date.parse(i.created_at)) / 1000) + "</td><td>" + esc(i.env_key || "") + "</td><td>" + jobLinks(i.jobs) + "</td><td>" +
        esc(i.delete_reason || "") + (i.last_error ? ' <span class="bad">' + esc(i.last_error) + "</span>" : "") + "</td></tr>").join("");
      $("#deleted tbody").innerHTML = d.deleted.map((i) => "<tr><td>" + esc(i.id) + "</td><td>" + ts(i.at) + '</td><td class="num">' +
        dur(i.lifetime_s) + "</td><td>" + esc(i.reason) + "</td><td>" + jobLinks(i.jobs) + "</td></tr>").join("");
    });
  }

  function jobLinks(jobs) {
    return (jobs || []).map((j) => j.source === "queue" ? '<a href="#jobs/' + esc(j.id) + '">' + esc(j.id) + "</a>" : esc(j.source + " " + j.id)).join(" ");
  }

  function jobs() {
    const q = "state=" + encodeURIComponent(state.jobFilter.state) + "&source=" + encodeURIComponent(state.jobFilter.source);
    return get("/ui/api/jobs?" + q, (d) => {
      const now = Date.now();
      state.jobStates = {};
      $("#jobs tbody").innerHTML = d.jobs.map((j) => {
        state.jobStates[j.source + "-" + j.id] = j.state;
        // A queued job waits as long as it has been queued, and says why.
        const wait = j.wait_s != null ? j.wait_s : (j.state === "queued" && j.created_at ? (now - Date.parse(j.created_at)) / 1000 : null);
        const ran = j.started_at ? ((j.finished_at ? Date.parse(j.finished_at) : now) - Date.parse(j.started_at)) / 1000 : null;
        const why = j.waiting_for ? '<span class="waiting" title="' + esc(j.waiting_detail || "") + '">waiting for ' + esc(j.waiting_for) + "</span>" : esc(j.reason || j.script || "");
        return '<tr class="click" data-source="' + esc(j.source) + '" data-id="' + esc(j.id) + '" id="job-' + esc(j.source) + "-" + esc(j.id) + '"><td>' +
          esc(j.source) + '</td><td>' + esc(j.id) + '</td><td class="owner">' + esc(owner(j)) + '</td><td class="state">' + esc(j.state) + "</td><td>" +
          ts(j.created_at || j.started_at) + '</td><td class="num wait">' + dur(wait) + '</td><td class="num ran"' +
          (j.started_at && !j.finished_at ? ' data-started="' + esc(j.started_at) + '"' : "") + ">" + dur(ran) + "</td><td>" + esc(j.instance || "") + '</td><td class="num">' +
          (j.exit_code == null ? "" : j.exit_code) + '</td><td class="why">' + why + "</td></tr>";
      }).join("");
      markOpenJob();
      showCancel();
    });
  }

  // owner names who queued a job: the API leaves the admin's jobs without
  // an owner, which the table would show as a blank.
  function owner(j) {
    return j.owner || (j.source === "queue" ? "admin" : "");
  }

  // The jobs list is polled with If-None-Match and does not change while a
  // job only runs on: its "Ran" advances here, every second.
  setInterval(() => {
    document.querySelectorAll("#jobs td.ran[data-started]").forEach((td) => {
      td.textContent = dur((Date.now() - Date.parse(td.dataset.started)) / 1000);
    });
  }, 1000);

  // showCancel offers "Cancel job" only for a job that can still be
  // canceled: queued or running.
  function showCancel() {
    const st = state.log && state.jobStates ? state.jobStates["queue-" + state.log.id] : null;
    $("#log-cancel").hidden = !(st === "queued" || st === "running") || $("#log").dataset.done === "1";
  }

  function markOpenJob() {
    document.querySelectorAll("#jobs tr.sel").forEach((r) => r.classList.remove("sel"));
    if (state.log) { const r = document.getElementById("job-queue-" + state.log.id); if (r) r.classList.add("sel"); }
  }

  // openLog streams a queue job's log (follow=1) into the page.
  async function openLog(id) {
    closeLog();
    const ctl = new AbortController();
    state.log = { id, ctl };
    $("#log-box").hidden = false;
    $("#log-id").textContent = id;
    showCancel();
    const pre = $("#log");
    pre.textContent = "";
    markOpenJob();
    try {
      const r = await fetch("/ui/api/jobs/" + encodeURIComponent(id) + "/log?follow=1", { signal: ctl.signal, cache: "no-store" });
      if (!r.ok) { pre.textContent = (await r.json()).error || r.statusText; return; }
      const rd = r.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        pre.textContent += dec.decode(value, { stream: true });
        pre.scrollTop = pre.scrollHeight;
      }
      pre.dataset.done = "1";
      showCancel();
    } catch (e) {
      if (e.name !== "AbortError") pre.textContent += "\n[log stream ended: " + e.message + "]";
    }
  }

  function closeLog() {
    if (state.log) state.log.ctl.abort();
    state.log = null;
    $("#log-box").hidden = true;
    delete $("#log").dataset.done;
  }

  async function cancelJob() {
    if (!state.log) return;
    const r = await fetch("/ui/api/jobs/" + encodeURIComponent(state.log.id) + "/cancel", { method: "POST", headers: { "X-CSRF-Token": csrf } });
    if (!r.ok) alert((await r.json()).error || r.statusText);
    state.etags = {};
    refresh();
  }

  function waits() {
    rangeButtons("waits", refresh);
    return get("/ui/api/waits?" + rangeQuery("waits"), (d) => {
      const w = d.waits;
      chart("chart-waits", "waits", [
        { label: "p50", stroke: "#2e7d32", width: 2, points: { show: true } },
        { label: "p95", stroke: "#f9a825", width: 2, points: { show: true } },
        { label: "p99", stroke: "#c62828", width: 2, points: { show: true } },
        { label: "jobs", stroke: "#9e9e9e", scale: "n", width: 1 }],
      [w.t, w.p50, w.p95, w.p99, w.jobs], { axes: [{ label: "hour" }, { size: 60, label: "wait (s)" }, { scale: "n", side: 1, grid: { show: false }, label: "jobs" }] });
      const c = d.cost;
      // Stacked bars: each bar is drawn over the taller one behind it. A
      // day berth did not run is null: no bar, "no data" in the table.
      const bars = uPlot.paths.bars({ size: [0.6, 80] });
      const sum = (a, b) => a.map((v, i) => v == null ? null : +(v + b[i]).toFixed(2));
      const hb = sum(c.hot_h, c.booting_h), all = sum(hb, c.suspended_h);
      chart("chart-cost", "", [
        { label: "+ suspended h", stroke: colors.suspended, fill: colors.suspended + "99", paths: bars, points: { show: false } },
        { label: "+ booting h", stroke: colors.booting, fill: colors.booting + "cc", paths: bars, points: { show: false } },
        { label: "hot h", stroke: colors.hot, fill: colors.hot + "cc", paths: bars, points: { show: false } }],
      [c.t, all, hb, c.hot_h], { axes: [{ label: "day (UTC)" }, { size: 60, label: "instance-hours" }], scales: { x: { time: true, range: timeRange(D / 2) }, y: { range: (u, mn, mx) => [0, Math.max(1, (mx || 0) * 1.1)] } } });
      $("#cost tbody").innerHTML = c.t.map((t, i) => "<tr><td>" + ts(t * 1000).slice(0, 10) + "</td>" + (c.hot_h[i] == null
        ? '<td colspan="4" class="nodata" title="no sample of the fleet that day: berth was not running">no data</td>'
        : '<td class="num">' + c.hot_h[i] + '</td><td class="num">' + c.booting_h[i] + '</td><td class="num">' + c.suspended_h[i] +
          '</td><td class="num">' + (c.util[i] == null ? "" : Math.round(c.util[i] * 100) + "%") + "</td>") + "</tr>").join("");
      chart("chart-util", "waits", [{ label: "utilization", stroke: "#6a1b9a", width: 2 }], [d.util.t, d.util.util], { axes: [{ label: "time" }, { size: 60, label: "acquired / usable" }], scales: { x: { time: true, range: timeRange(0) }, y: { range: [0, 1] } } });
    });
  }

  function decisions() {
    return get("/ui/api/decisions", (d) => {
      const z = d.sizing;
      $("#sizing").textContent = z ? "Sized for target_wait " + dur(z.target_wait_s) + ": " + z.hot + " hot slots, " + z.suspended + " suspended instances; forecast " +
        z.rate_per_s.toFixed(3) + " jobs/s, burst " + z.burst.toFixed(1) + " (" + z.source + "), boot " + dur(z.boot_time_s) + ", resume " + dur(z.resume_time_s) : "No pool sizing yet (no target_wait policy, or nothing decided since start).";
      $("#decisions tbody").innerHTML = d.decisions.map((x) => "<tr><td>" + ts(x.at) + "</td><td>" + esc((x.tier ? "tier " : "") + "scale " + x.direction) +
        '</td><td class="num">' + x.n + '</td><td class="num">' + x.in_use + '</td><td class="num">' + x.idle_target + '</td><td class="num">' + x.have + " → " + x.want +
        '</td><td class="num">' + x.suspended + " (" + x.suspended_target + ")</td><td>" +
        (x.forecast ? esc(x.forecast.rate_per_s.toFixed(3) + "/s, burst " + x.forecast.burst.toFixed(1) + " (" + x.forecast.source + ")") : "") +
        '</td><td class="insts">' + esc((x.instances || []).join(" ")) + (x.reason ? " (" + esc(x.reason) + ")" : "") + "</td></tr>").join("");
    });
  }

  function health() {
    return get("/ui/api/health", (d) => { $("#health").innerHTML = render(d); });
  }

  function render(v) {
    if (v == null) return "";
    if (Array.isArray(v)) return "<ul>" + v.map((x) => "<li>" + render(x) + "</li>").join("") + "</ul>";
    if (typeof v === "object") return "<table>" + Object.entries(v).map(([k, x]) => "<tr><th>" + esc(k) + "</th><td" + (k === "status" && x !== "ok" ? ' class="bad"' : "") + ">" + render(x) + "</td></tr>").join("") + "</table>";
    return esc(v);
  }

  const pages = { fleet: [fleet, 3000], jobs: [jobs, 2000], waits: [waits, 10000], decisions: [decisions, 3000], health: [health, 5000] };

  async function refresh() {
    clearTimeout(state.timer);
    const [fn, every] = pages[state.page];
    try { await fn(); } catch (e) { console.error(e); }
    state.timer = setTimeout(refresh, every);
  }

  function route() {
    const [page, arg] = (location.hash.slice(1) || "fleet").split("/");
    const p = pages[page] ? page : "fleet";
    document.querySelectorAll("main > section").forEach((s) => s.hidden = s.id !== "page-" + p);
    document.querySelectorAll("header nav a").forEach((a) => a.className = a.id === "nav-" + p ? "on" : "");
    state.page = p;
    if (p === "jobs" && arg && (!state.log || state.log.id !== arg)) openLog(arg);
    if (p !== "jobs") closeLog();
    refresh();
  }

  $("#f-state").onchange = (e) => { state.jobFilter.state = e.target.value; refresh(); };
  $("#f-source").onchange = (e) => { state.jobFilter.source = e.target.value; refresh(); };
  $("#jobs tbody").addEventListener("click", (e) => {
    const tr = e.target.closest("tr");
    if (!tr) return;
    if (tr.dataset.source === "queue") location.hash = "jobs/" + tr.dataset.id;
  });
  $("#log-close").onclick = () => { closeLog(); location.hash = "jobs"; };
  $("#log-cancel").onclick = cancelJob;
  window.addEventListener("hashchange", route);
  route();
})();
