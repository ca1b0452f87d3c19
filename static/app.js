// Copy buttons: <button data-copy="value">. No inline script anywhere (CSP).
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    var status = document.getElementById("announce");
    if (status) status.textContent = "Copied to the clipboard";
    setTimeout(function () { button.textContent = label; if (status) status.textContent = ""; }, 1200);
  });
});

// A page rendered as the answer to a POST (a refused decision) names its
// own address in <main data-url>: put it in the address bar, so that a
// reload shows the page instead of posting the form again.
(function () {
  var main = document.getElementById("main");
  var url = main && main.getAttribute("data-url");
  if (url && url.charAt(0) === "/" && location.pathname !== url && window.history && history.replaceState) {
    history.replaceState(null, "", url);
  }
})();

// Live refresh (lists with "Live refresh" on): the list is polled every
// 5 s, but not while the reader points at it, has the focus or a
// selection in it, or has paused it; new rows are announced ("2 new"),
// the list is not an aria-live region. Results of a filter are announced
// by their count.
(function () {
  var paused = false;
  var announce = function (text) {
    var status = document.getElementById("announce");
    if (!status) return;
    status.textContent = "";
    setTimeout(function () { status.textContent = text; }, 50);
  };
  var sync = function () {
    var b = document.querySelector("button[data-pause-live]");
    if (!b) return;
    b.setAttribute("aria-pressed", String(paused));
    b.textContent = paused ? "Resume live refresh" : "Pause live refresh";
  };
  var rows = function (el) {
    var keys = {};
    if (!el) return keys;
    el.querySelectorAll("tbody tr a[href]").forEach(function (a) { keys[a.getAttribute("href")] = true; });
    return keys;
  };
  var busy = function (el) {
    var active = document.activeElement;
    if (active && active !== document.body && el.contains(active)) return true;
    if (el.matches(":hover")) return true;
    var sel = window.getSelection && window.getSelection();
    return !!(sel && !sel.isCollapsed && el.contains(sel.anchorNode));
  };
  var before = null;
  document.addEventListener("click", function (event) {
    if (!event.target.closest("button[data-pause-live]")) return;
    paused = !paused;
    sync();
    announce(paused ? "Live refresh paused" : "Live refresh resumed");
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || elt.id !== "results" || !elt.hasAttribute("data-live")) return;
    if (paused || busy(elt)) event.preventDefault();
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    before = target && target.id === "results" ? { live: event.detail.requestConfig && event.detail.requestConfig.elt === target, rows: rows(target) } : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    var el = document.getElementById("results");
    if (!el || !before) return;
    sync();
    var now = rows(el);
    if (before.live) {
      var added = 0;
      for (var k in now) if (!before.rows[k]) added++;
      if (added > 0) announce(added + " new");
    } else if (!el.querySelector("[role=alert]")) {
      announce(Object.keys(now).length + " shown");
    }
    before = null;
  });
})();

// Filter forms (hx-get): empty fields stay out of the URL, so that a
// list's address carries only the filters in use.
document.addEventListener("htmx:configRequest", function (event) {
  var detail = event.detail;
  if (!detail || detail.verb !== "get" || !detail.formData) return;
  var empty = [];
  detail.formData.forEach(function (value, name) { if (value === "") empty.push(name); });
  empty.forEach(function (name) { detail.formData.delete(name); });
});
