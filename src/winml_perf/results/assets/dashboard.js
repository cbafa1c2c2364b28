/* winml-perf dashboard: draws SVG charts from the inline JSON in #winml-data. No network, no
 * libraries. After each render it writes what it drew into #winml-status (data-points,
 * data-records, data-charts, data-bars, data-errors, data-state) for headless tests.
 * index.html#metric=NAME opens the page on that metric (a name of the data's metric table). */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var errors = [];
  var counts = { points: 0, charts: 0, bars: 0, flags: 0 };
  var data = null;

  function status(state) {
    var el = document.getElementById("winml-status");
    if (!el) { return; }
    el.setAttribute("data-state", state);
    el.setAttribute("data-errors", String(errors.length));
    el.setAttribute("data-error-messages", errors.join(" | ").slice(0, 2000));
    el.setAttribute("data-points", String(counts.points));
    el.setAttribute("data-records", String(data ? data.records : 0));
    el.setAttribute("data-charts", String(counts.charts));
    el.setAttribute("data-bars", String(counts.bars));
    el.setAttribute("data-flags", String(counts.flags));
    el.setAttribute("data-metric", document.getElementById("metric") ? document.getElementById("metric").value : "");
  }

  window.addEventListener("error", function (e) { errors.push(String(e.message || e)); status("error"); });
  window.addEventListener("unhandledrejection", function (e) { errors.push("unhandled rejection: " + e.reason); status("error"); });
  var consoleError = console.error;
  console.error = function () {
    errors.push(Array.prototype.map.call(arguments, String).join(" "));
    consoleError.apply(console, arguments);
    status("error");
  };

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(SVGNS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function html(name, attrs, parent, text) {
    var node = document.createElement(name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function fmt(x) {
    if (x === null || x === undefined || !isFinite(x)) { return "–"; }
    var a = Math.abs(x);
    if (a >= 1e9) { return (x / 1e9).toFixed(2) + "G"; }
    if (a >= 1e6) { return (x / 1e6).toFixed(2) + "M"; }
    if (a >= 1e4) { return (x / 1e3).toFixed(1) + "k"; }
    if (a >= 100) { return x.toFixed(0); }
    if (a >= 10) { return x.toFixed(1); }
    return x.toFixed(2);
  }

  function metricInfo(name) {
    for (var i = 0; i < data.metrics.length; i++) { if (data.metrics[i].name === name) { return data.metrics[i]; } }
    return { name: name, unit: "", bigger_is_better: false };
  }

  function metricFor(series, wanted) {
    var has = function (m) { return series.points.some(function (p) { return p.v[m]; }); };
    if (wanted && has(wanted)) { return wanted; }
    for (var i = 0; i < data.metrics.length; i++) { if (has(data.metrics[i].name)) { return data.metrics[i].name; } }
    return null;
  }

  function scale(d0, d1, r0, r1) {
    var span = d1 - d0;
    return function (v) { return span === 0 ? (r0 + r1) / 2 : r0 + (v - d0) / span * (r1 - r0); };
  }

  function yDomain(values) {
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    if (!isFinite(lo)) { return [0, 1]; }
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  function pointTitle(p, metric, v) {
    var lines = [p.t.slice(0, 19).replace("T", " ") + " UTC", "record " + p.id + ", run " + (p.run || "").slice(0, 8)];
    if (p.commit) { lines.push("commit " + p.commit.slice(0, 10)); }
    if (p.status !== "ok") { lines.push("FAILED cell"); }
    if (v) { lines.push(metric + " " + fmt(v[0]) + (v[1] !== null ? " [" + fmt(v[1]) + ", " + fmt(v[2]) + "]" : "")); }
    var f = p.flags[metric];
    if (f) { lines.push(f.flag + ": " + f.delta_pct.toFixed(2) + "% vs rolling baseline (p=" + f.p_value.toPrecision(3) + ")"); }
    return lines.join("\n");
  }

  function drawAxes(svg, g, x0, x1, y, dom, times) {
    for (var i = 0; i <= 4; i++) {
      var v = dom[0] + (dom[1] - dom[0]) * i / 4;
      el("line", { x1: g.l, x2: g.w - g.r, y1: y(v), y2: y(v), "class": "grid-line" }, svg);
      el("text", { x: g.l - 6, y: y(v) + 4, "text-anchor": "end" }, svg, fmt(v));
    }
    el("line", { x1: g.l, x2: g.w - g.r, y1: g.h - g.b, y2: g.h - g.b, "class": "axis" }, svg);
    el("line", { x1: g.l, x2: g.l, y1: g.t, y2: g.h - g.b, "class": "axis" }, svg);
    el("text", { x: g.l, y: g.h - g.b + 16, "text-anchor": "start" }, svg, new Date(x0).toISOString().slice(0, 10));
    if (x1 !== x0) { el("text", { x: g.w - g.r, y: g.h - g.b + 16, "text-anchor": "end" }, svg, new Date(x1).toISOString().slice(0, 10)); }
    el("text", { x: (g.l + g.w - g.r) / 2, y: g.h - 4, "text-anchor": "middle" }, svg, times + " record(s)");
  }

  function drawSeries(parent, series, wanted) {
    var metric = metricFor(series, wanted);
    var card = html("div", { "class": "card" }, parent);
    html("h3", {}, card, series.label);
    var info = metric ? metricInfo(metric) : null;
    html("div", { "class": "sub" }, card, metric ? metric + " (" + info.unit + ", " + (info.bigger_is_better ? "higher" : "lower") + " is better)" : "no successful cell");
    var g = { w: 640, h: 220, l: 58, r: 14, t: 10, b: 34 };
    var svg = el("svg", { viewBox: "0 0 " + g.w + " " + g.h, role: "img", "class": "history", "data-series": series.label }, card);
    var ts = series.points.map(function (p) { return Date.parse(p.t); });
    var x0 = Math.min.apply(null, ts), x1 = Math.max.apply(null, ts);
    var x = scale(x0, x1, g.l + 10, g.w - g.r - 10);
    var ys = [];
    series.points.forEach(function (p) {
      var v = metric ? p.v[metric] : null;
      if (v) { ys.push(v[0]); if (v[1] !== null) { ys.push(v[1], v[2]); } }
    });
    var dom = yDomain(ys);
    var y = scale(dom[0], dom[1], g.h - g.b, g.t);
    drawAxes(svg, g, x0, x1, y, dom, series.points.length);
    var path = [];
    series.points.forEach(function (p, i) { var v = metric ? p.v[metric] : null; if (v) { path.push(x(ts[i]).toFixed(1) + "," + y(v[0]).toFixed(1)); } });
    if (path.length > 1) { el("polyline", { points: path.join(" "), "class": "line" }, svg); }
    series.points.forEach(function (p, i) {
      var v = metric ? p.v[metric] : null, cx = x(ts[i]), node;
      if (p.status !== "ok") {
        var by = g.h - g.b - 6;
        node = el("path", { d: "M" + (cx - 4) + "," + (by - 4) + "L" + (cx + 4) + "," + (by + 4) + "M" + (cx - 4) + "," + (by + 4) + "L" + (cx + 4) + "," + (by - 4), "class": "pt failed" }, svg);
      } else if (!v) {
        node = el("circle", { cx: cx, cy: g.h - g.b - 6, r: 3.5, "class": "pt missing" }, svg);
      } else {
        if (v[1] !== null && v[2] !== null) { el("line", { x1: cx, x2: cx, y1: y(v[1]), y2: y(v[2]), "class": "whisker" }, svg); }
        var flag = p.flags[metric];
        node = el("circle", { cx: cx, cy: y(v[0]), r: flag ? 5 : 3.5, "class": "pt" + (flag ? " " + flag.flag : "") }, svg);
      }
      node.setAttribute("data-record", String(p.id));
      el("title", {}, node, pointTitle(p, metric, v));
      counts.points += 1;
    });
    counts.charts += 1;
  }

  function drawRoutes(parent, wanted) {
    var panels = data.routes.filter(function (r) { return r.metric === wanted; });
    if (!panels.length) { html("p", { "class": "empty" }, parent, data.routes.length ? "no route comparison for " + wanted : "no interleaved run with a config route and another route"); return; }
    var grid = html("div", { "class": "grid" }, parent);
    panels.forEach(function (panel) {
      var card = html("div", { "class": "card" }, grid);
      html("h3", {}, card, panel.bundle + " · " + panel.shape + " · " + panel.testbed);
      html("div", { "class": "sub" }, card, "run " + panel.run.slice(0, 8) + " · " + panel.metric + " speedup over config (>1 = faster)");
      var rowH = 26, g = { w: 640, l: 110, r: 170, t: 8 };
      g.h = g.t + rowH * panel.bars.length + 22;
      var svg = el("svg", { viewBox: "0 0 " + g.w + " " + g.h, role: "img", "class": "routes" }, card);
      var top = 1.1;
      panel.bars.forEach(function (b) { top = Math.max(top, (b.hi || b.speedup || 0) * 1.08); });
      var x = scale(0, top, g.l, g.w - g.r);
      panel.bars.forEach(function (b, i) {
        var yTop = g.t + i * rowH, s = isFinite(b.speedup) ? b.speedup : 0;
        el("text", { x: g.l - 6, y: yTop + 16, "text-anchor": "end" }, svg, b.route);
        var bar = el("rect", { x: g.l, y: yTop + 4, width: Math.max(0, x(s) - g.l), height: rowH - 10, "class": "bar " + b.verdict }, svg);
        el("title", {}, bar, b.sentence || "baseline route");
        if (b.lo !== null && b.hi !== null && isFinite(b.lo) && isFinite(b.hi)) {
          var cy = yTop + rowH / 2 - 1;
          el("line", { x1: x(b.lo), x2: x(b.hi), y1: cy, y2: cy, "class": "axis" }, svg);
          el("line", { x1: x(b.lo), x2: x(b.lo), y1: cy - 5, y2: cy + 5, "class": "axis" }, svg);
          el("line", { x1: x(b.hi), x2: x(b.hi), y1: cy - 5, y2: cy + 5, "class": "axis" }, svg);
        }
        var label = b.verdict === "baseline" ? "1.00× (baseline)" : fmt(s) + "× [" + fmt(b.lo) + ", " + fmt(b.hi) + "] " + b.verdict;
        el("text", { x: g.w - g.r + 6, y: yTop + 16 }, svg, label);
        counts.bars += 1;
      });
      el("line", { x1: x(1), x2: x(1), y1: g.t, y2: g.h - 20, "class": "ref" }, svg);
      el("text", { x: x(1), y: g.h - 6, "text-anchor": "middle" }, svg, "1×");
    });
  }

  function drawFlags(parent, wanted) {
    var rows = [];
    data.series.forEach(function (s) {
      s.points.forEach(function (p) { var f = p.flags[wanted]; if (f) { rows.push([s.label, p, f]); } });
    });
    counts.flags = rows.length;
    if (!rows.length) { html("p", { "class": "empty" }, parent, "nothing flagged for " + wanted + " (window " + data.window + ", threshold " + data.threshold_pct + "%)"); return; }
    var table = html("table", {}, parent);
    var head = html("tr", {}, table);
    ["series", "when (UTC)", "record", "commit", "change", "p", "flag"].forEach(function (h) { html("th", {}, head, h); });
    rows.forEach(function (r) {
      var tr = html("tr", {}, table);
      html("td", {}, tr, r[0]);
      html("td", {}, tr, r[1].t.slice(0, 16).replace("T", " "));
      html("td", {}, tr, String(r[1].id));
      html("td", {}, tr, (r[1].commit || "").slice(0, 10));
      html("td", {}, tr, (r[2].delta_pct > 0 ? "+" : "") + r[2].delta_pct.toFixed(2) + "%");
      html("td", {}, tr, r[2].p_value.toPrecision(3));
      html("td", { "class": r[2].flag + "-text" }, tr, r[2].flag);
    });
  }

  function render(metric) {
    counts = { points: 0, charts: 0, bars: 0, flags: 0 };
    ["routes", "flags", "history"].forEach(function (id) { document.getElementById(id).textContent = ""; });
    drawRoutes(document.getElementById("routes"), metric);
    drawFlags(document.getElementById("flags"), metric);
    var grid = html("div", { "class": "grid" }, document.getElementById("history"));
    if (!data.series.length) { html("p", { "class": "empty" }, grid, "the store holds no records"); }
    data.series.forEach(function (s) { drawSeries(grid, s, metric); });
    status(errors.length ? "error" : "done");
  }

  function start() {
    data = JSON.parse(document.getElementById("winml-data").textContent);
    document.getElementById("meta").textContent = data.records + " record(s) in " + data.series.length + " series from " + data.store +
      " · generated " + data.generated_utc + " · regressions: Mann-Whitney p<0.05 and beyond " + data.threshold_pct + "% vs the previous " + data.window + " record(s)";
    var select = document.getElementById("metric");
    data.metrics.forEach(function (m) { html("option", { value: m.name }, select, m.label || m.name); });
    var first = data.metrics.length ? data.metrics[0].name : "";
    var asked = /(?:^#|&)metric=([a-z0-9_]+)/.exec(window.location.hash || "");
    if (asked && data.metrics.some(function (m) { return m.name === asked[1]; })) { first = asked[1]; }
    select.value = first;
    select.addEventListener("change", function () { render(select.value); });
    render(first);
  }

  try {
    start();
  } catch (e) {
    errors.push(String(e && e.stack ? e.stack : e));
    status("error");
  }
})();
