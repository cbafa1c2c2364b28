/* winml-perf dashboard: the charts are inline SVG already; this script only runs the filters
 * (select[data-filter] hides elements whose data-<name> differs; index.html#testbed=X&route=Y
 * presets them) and reports into #winml-status what the page drew (data-points: markers of the
 * primary card or of the index, data-state, data-errors, data-cards: each card's metric and its
 * vertical span in px, data-content-right: the right edge of the rightmost chart or table) for
 * headless tests; and it writes the numbers of the charts' hover titles (below). */
(function () {
  "use strict";
  var errors = [];
  var status = document.getElementById("winml-status");

  function report(state) {
    var primary = document.querySelector(".card[data-primary]");
    status.setAttribute("data-state", state);
    status.setAttribute("data-errors", String(errors.length));
    status.setAttribute("data-error-messages", errors.join(" | ").slice(0, 2000));
    status.setAttribute("data-points", String(primary ? primary.querySelectorAll(".pt").length : 0));
    status.setAttribute("data-rows", String(document.querySelectorAll("table.index tbody tr:not(.hidden)").length));
    status.setAttribute("data-visible-charts", String(document.querySelectorAll(".mult:not(.hidden) svg.chart").length));
    var cards = [], right = 0;
    document.querySelectorAll(".card").forEach(function (card) {
      var box = card.getBoundingClientRect();
      cards.push(card.getAttribute("data-metric") + ":" + Math.round(box.top + window.scrollY) + "-" + Math.round(box.bottom + window.scrollY));
    });
    document.querySelectorAll("svg.chart, table.index").forEach(function (node) {
      right = Math.max(right, node.getBoundingClientRect().right);
    });
    status.setAttribute("data-cards", cards.join(" "));
    status.setAttribute("data-content-right", String(Math.round(right)));
  }

  window.addEventListener("error", function (e) { errors.push(String(e.message || e)); report("error"); });
  var consoleError = console.error;
  console.error = function () {
    errors.push(Array.prototype.map.call(arguments, String).join(" "));
    consoleError.apply(console, arguments);
    report("error");
  };

  function apply() {
    var wanted = {};
    document.querySelectorAll("select[data-filter]").forEach(function (sel) { wanted[sel.getAttribute("data-filter")] = sel.value; });
    document.querySelectorAll("[data-testbed], [data-route]").forEach(function (node) {
      if (node.tagName === "SELECT") { return; }
      var hide = Object.keys(wanted).some(function (k) {
        var v = node.getAttribute("data-" + k);
        return wanted[k] && v !== null && v !== wanted[k];
      });
      node.classList.toggle("hidden", hide);
    });
    report(errors.length ? "error" : "done");
  }

  /* A chart's markers carry no titles: their group (g.pts) holds what each says, the records'
   * labels (data-t, data-commit, data-version, data-run: JSON lists; data-testbed) and each record's
   * value, low and high exactly (data-v, data-lo, data-hi: base64 of little-endian float64s, NaN:
   * none; dashboard_svg.packed), and its unit. When the pointer first reaches a marker of the
   * group, every marker gets its title: winmlTitle's text, then ' · value [low, high] unit'
   * (winmlHuman, human.js), or ' · failed'. */
  function column(group, name) {
    var bytes = atob(group.getAttribute("data-" + name) || ""), view = new DataView(new ArrayBuffer(bytes.length)), out = [];
    for (var i = 0; i < bytes.length; i++) { view.setUint8(i, bytes.charCodeAt(i)); }
    for (var j = 0; j + 8 <= bytes.length; j += 8) { out.push(view.getFloat64(j, true)); }
    return out;
  }

  function labels(group) {
    var out = {testbed: group.getAttribute("data-testbed")};
    ["t", "commit", "version", "run"].forEach(function (k) { out[k] = JSON.parse(group.getAttribute("data-" + k) || "[]"); });
    return out;
  }

  function hoverTitles(group) {
    if (group.hasAttribute("data-titles")) { return; }
    group.setAttribute("data-titles", "");
    var v = column(group, "v"), lo = column(group, "lo"), hi = column(group, "hi"), unit = group.getAttribute("data-unit");
    var names = labels(group);
    group.querySelectorAll(".pt").forEach(function (pt, i) {
      var title = document.createElementNS(pt.namespaceURI, "title"), text = winmlTitle(names, i);
      if (pt.classList.contains("failed")) {
        text += " · failed";
      } else {
        var band = lo[i] === lo[i] && hi[i] === hi[i] ? " [" + winmlHuman(lo[i]) + ", " + winmlHuman(hi[i]) + "]" : "";
        text += " · " + winmlHuman(v[i]) + band + " " + unit;
      }
      title.textContent = text;
      pt.appendChild(title);
    });
  }

  document.addEventListener("mouseover", function (e) {
    var group = e.target instanceof Element ? e.target.closest("g.pts") : null;
    if (group) { hoverTitles(group); }
  });

  function init() {
    var preset = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { preset[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    document.querySelectorAll("select[data-filter]").forEach(function (sel) {
      var name = sel.getAttribute("data-filter");
      if (preset[name] !== undefined) { sel.value = preset[name]; }
      sel.addEventListener("change", apply);
    });
    apply();
  }

  init();
})();
