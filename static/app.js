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

// A list row's "More" (phones): shows the row's other fields (its cells
// marked "extra"). Open rows stay open across a live refresh of the list.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-row-more]");
  if (!button) return;
  var row = button.closest("tr");
  var open = !row.classList.contains("open");
  row.classList.toggle("open", open);
  button.setAttribute("aria-expanded", String(open));
});
(function () {
  var opened = [];
  var key = function (tr) { var a = tr.querySelector("a[href]"); return a ? a.getAttribute("href") : tr.getAttribute("data-seq"); };
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    opened = [];
    if (target) target.querySelectorAll("tr.open").forEach(function (tr) { opened.push(key(tr)); });
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!opened.length) return;
    var target = event.detail && event.detail.target;
    var root = target && document.contains(target) ? target : document;
    root.querySelectorAll("tr").forEach(function (tr) {
      if (opened.indexOf(key(tr)) < 0) return;
      tr.classList.add("open");
      var b = tr.querySelector("button[data-row-more]");
      if (b) b.setAttribute("aria-expanded", "true");
    });
    opened = [];
  });
})();

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
// by their count. An operation's page refreshes its live part (#live)
// the same way while the operation moves, but not while the reader points
// at its decisions or has typed in one of their forms; a status change is
// announced ("Status: compensated").
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
  var typed = function (el) {
    return Array.prototype.some.call(el.querySelectorAll("form textarea, form input, form option"), function (f) {
      if (f.tagName === "OPTION") return f.selected !== f.defaultSelected;
      if (f.type === "radio" || f.type === "checkbox") return f.checked !== f.defaultChecked;
      return f.type !== "hidden" && f.value !== f.defaultValue;
    });
  };
  var busy = function (el) {
    if (el.id === "live") {
      var decide = el.querySelector("[data-decide]");
      if (typed(el) || (decide && decide.matches(":hover"))) return true;
    }
    // The outcome notice a decision focuses is read, not edited: focus on
    // it does not hold the refresh.
    var active = document.activeElement;
    if (active && active !== document.body && el.contains(active) && !active.matches(".notice[role=status]")) return true;
    if (el.id !== "live" && el.matches(":hover")) return true;
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
    if (!elt || (elt.id !== "results" && elt.id !== "live") || !elt.hasAttribute("data-live")) return;
    if (paused || busy(elt)) event.preventDefault();
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "live") {
      before = { status: target.getAttribute("data-status") };
      return;
    }
    before = target && target.id === "results" ? { live: event.detail.requestConfig && event.detail.requestConfig.elt === target, rows: rows(target) } : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    var live = document.getElementById("live");
    if (live && before && before.status !== undefined) {
      sync();
      var status = live.getAttribute("data-status");
      if (status !== before.status) announce("Status: " + status);
      before = null;
      return;
    }
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
      var heading = document.getElementById("results-title");
      if (heading) heading.focus();
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

// Times: the server writes UTC; the viewer may see them in their own zone
// (the default) or in UTC, with the other form on hover (title). The
// choice is kept in localStorage.
(function () {
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  var utc = function (d) {
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + "Z";
  };
  var local = function (d) {
    var off = -d.getTimezoneOffset();
    var sign = off < 0 ? "-" : "+";
    off = Math.abs(off);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
      " UTC" + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60);
  };
  var mode = function () {
    try { return localStorage.getItem("unstuck.times") === "utc" ? "utc" : "local"; } catch (e) { return "local"; }
  };
  var apply = function () {
    var m = mode();
    document.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.title = m === "utc" ? utc(d) + " · " + local(d) : local(d) + " · " + utc(d);
    });
    document.querySelectorAll("[data-at]").forEach(function (el) {
      var d = new Date(el.getAttribute("data-at"));
      if (isNaN(d)) return;
      el.textContent = "(" + (m === "utc" ? utc(d) : local(d)) + ")";
      el.title = m === "utc" ? local(d) : utc(d);
    });
    var b = document.querySelector("button[data-times-toggle]");
    if (b) b.setAttribute("aria-pressed", String(m === "utc"));
  };
  document.addEventListener("click", function (event) {
    if (!event.target.closest("button[data-times-toggle]")) return;
    try { localStorage.setItem("unstuck.times", mode() === "utc" ? "local" : "utc"); } catch (e) { /* private mode */ }
    apply();
  });
  document.addEventListener("htmx:afterSettle", apply);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", apply); else apply();
})();

// The overview's tab title ("(3) Overview · unstuck") follows what needs a
// human: the page is read again every data-title-refresh seconds, its
// title taken, and a change announced; the page itself does not move.
(function () {
  var h1 = document.querySelector("h1[data-title-refresh]");
  if (!h1 || !window.fetch || !window.DOMParser) return;
  var every = parseInt(h1.getAttribute("data-title-refresh"), 10) * 1000;
  if (!(every > 0)) return;
  setInterval(function () {
    if (document.hidden) return;
    fetch(location.pathname + location.search, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var title = doc.title;
        // The navigation's approvals count follows with the title.
        var fresh = doc.querySelector('nav a[href="/approvals"]');
        var link = document.querySelector('nav a[href="/approvals"]');
        if (fresh && link && fresh.textContent !== link.textContent) link.textContent = fresh.textContent;
        if (title && title !== document.title) {
          document.title = title;
          var status = document.getElementById("announce");
          if (status) status.textContent = title.replace(/ · unstuck$/, "");
        }
      })
      .catch(function () { /* offline: try again later */ });
  }, every);
})();

// "/" puts the focus in the header's search box, as on most sites, unless
// the reader is typing in a field.
document.addEventListener("keydown", function (event) {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  var t = event.target;
  if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
  var box = document.querySelector('header [role="search"] input[name="q"], header form.search input[name="q"]');
  if (!box) return;
  event.preventDefault();
  box.focus();
  box.select();
});

// Date filters (<input type="datetime-local" data-utc>): the server reads
// and writes them in UTC; unless the viewer chose UTC times, they are
// shown and typed in the viewer's zone, which their label names, and sent
// back in UTC. The "today" preset starts at the viewer's midnight.
(function () {
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  var utcMode = function () { try { return localStorage.getItem("unstuck.times") === "utc"; } catch (e) { return false; } };
  var fmtLocal = function (d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()); };
  var fmtUTC = function (d) { return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + "T" + pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()); };
  var zone = function () {
    var off = -new Date().getTimezoneOffset();
    var sign = off < 0 ? "-" : "+";
    off = Math.abs(off);
    return "(your time, UTC" + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60) + ")";
  };
  var toLocal = function () {
    if (utcMode()) return;
    document.querySelectorAll("input[data-utc]").forEach(function (input) {
      if (input.hasAttribute("data-local")) return;
      input.setAttribute("data-local", "");
      var m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)/.exec(input.value);
      if (m) input.value = fmtLocal(new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5])));
    });
    document.querySelectorAll("[data-zone]").forEach(function (s) { s.textContent = zone(); });
    var today = document.querySelector("a[data-preset-today]");
    if (today) {
      var midnight = new Date();
      midnight.setHours(0, 0, 0, 0);
      today.setAttribute("href", "/audit?from=" + encodeURIComponent(fmtUTC(midnight)));
    }
  };
  var toUTC = function (value) {
    var m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)$/.exec(value);
    return m ? fmtUTC(new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5])) : value;
  };
  document.addEventListener("htmx:configRequest", function (event) {
    var d = event.detail;
    if (!d || !d.formData || !d.elt || !d.elt.querySelector) return;
    d.elt.querySelectorAll("input[data-utc][data-local]").forEach(function (input) {
      if (d.formData.has(input.name)) d.formData.set(input.name, toUTC(d.formData.get(input.name)));
    });
  });
  document.addEventListener("submit", function (event) {
    // Without HTMX (a plain GET), the fields are converted in place.
    if (event.defaultPrevented || !event.target.querySelectorAll || event.target.hasAttribute("hx-get")) return;
    event.target.querySelectorAll("input[data-utc][data-local]").forEach(function (input) { input.value = toUTC(input.value); });
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", toLocal); else toLocal();
})();
