/* winml-perf dashboard: the formatter of the numbers in the charts' hover titles, the page's copy of
 * support/human_numbers.py's human() for a float, character for character (tests/unit/
 * test_dashboard_hover_numbers.py compares them): 4 significant digits rounded as Python's "%.3e"
 * rounds (correctly, an exact tie to even; toExponential takes a tie away from zero), a plain
 * decimal below 10 000, an SI suffix from 10 000 up to the 'T' range, e-notation beyond; '' when
 * the number is not finite. */
var winmlHuman = (function () {
  "use strict";
  var SIG = 4, SI = ["k", "M", "G", "T"];

  // whether d x 10^j (d an odd integer below 10^5) is exactly a double: its odd part fits 53 bits
  function exact(d, j) {
    if (j >= 0) { return j <= 22 && d * Math.pow(5, j) <= 9007199254740992; }
    return -j <= 22 && d % Math.pow(5, -j) === 0;
  }

  // [sign, the 4 digits, the exponent] of Python's "%.3e" % x (x finite, not 0)
  function digits(x) {
    var a = Math.abs(x), s = a.toExponential(SIG - 1), t = a.toExponential(SIG);
    var tm = t.slice(0, t.indexOf("e")).replace(".", ""), te = Number(t.slice(t.indexOf("e") + 1));
    var tie = tm.charAt(SIG) === "5" && Number(t) === a && exact(Number(tm), te - SIG);
    if (tie && Number(tm.charAt(SIG - 1)) % 2 === 0) { return [x < 0 ? "-" : "", tm.slice(0, SIG), te]; }
    return [x < 0 ? "-" : "", s.slice(0, s.indexOf("e")).replace(".", ""), Number(s.slice(s.indexOf("e") + 1))];
  }

  return function human(x) {
    if (!isFinite(x)) { return ""; }
    if (x === 0) { return "0"; }
    var e = digits(x), sign = e[0], d = e[1], p = e[2];
    if (p >= SIG && p < 3 * (SI.length + 1)) {  // 10 000 and up: an SI suffix, every digit kept
      var g = Math.floor(p / 3), w = p - 3 * g + 1;
      return sign + d.slice(0, w) + "." + d.slice(w) + SI[g - 1];
    }
    if (p >= SIG) { return sign + d.charAt(0) + "." + d.slice(1) + "e+" + p; }  // beyond the largest suffix
    if (p >= 0) { return sign + d.slice(0, p + 1) + (p + 1 < SIG ? "." + d.slice(p + 1) : ""); }
    if (p >= -9) { return sign + "0." + "0".repeat(-p - 1) + d; }
    return Number(sign + d.charAt(0) + "." + d.slice(1) + "e" + p).toFixed(12);  // at most 12 decimals
  };
})();

/* A marker's hover title without its numbers, from the labels of its group (publish/dashboard_svg.py
 * Labels: the lists of data-t, data-commit, data-version, data-run, parsed, and data-testbed) and
 * the marker's index: "TIME UTC · commit C · winml-perf V · TESTBED · run R". */
function winmlTitle(labels, i) {
  "use strict";
  return labels.t[i] + " UTC · commit " + labels.commit[i] + " · winml-perf " + labels.version[i] + " · " +
    labels.testbed + " · run " + labels.run[i];
}
