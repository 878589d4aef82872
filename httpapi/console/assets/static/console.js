// Portcullis console: live updates. The server's event stream says what
// changed (never a code); a page whose main region shows that kind of
// thing fetches the region again. No framework, no inline script.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var badge = document.getElementById("pending-count");
  var live = document.getElementById("live-status");
  if (!main || !window.EventSource || !window.fetch) {
    return;
  }
  var kinds = (main.getAttribute("data-live") || "").split(" ").filter(Boolean);
  var baseTitle = document.title.replace(/^\(\d+\) /, "");
  var inflight = false, again = false, waiting = false, expiryTimer = null;

  function setPending(n) {
    n = parseInt(n, 10);
    if (isNaN(n) || n < 0 || !badge) {
      return;
    }
    badge.textContent = String(n);
    badge.className = n > 0 ? "count some" : "count";
    document.title = (n > 0 ? "(" + n + ") " : "") + baseTitle;
  }

  // busy: the person is typing in the region (a deny reason, a code); a
  // refresh would throw the text away, so it waits.
  function busy() {
    var el = document.activeElement;
    if (el && main.contains(el) && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) && el.type !== "submit") {
      return true;
    }
    var fields = main.querySelectorAll("input[type=text], input[type=search], textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value) {
        return true;
      }
    }
    return false;
  }

  function refresh() {
    if (!kinds.length) {
      return;
    }
    if (busy()) {
      waiting = true;
      live.textContent = "live · paused while you type";
      return;
    }
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    waiting = false;
    fetch(location.href, { headers: { "X-Portcullis-Fragment": "1" }, credentials: "same-origin", cache: "no-store", redirect: "manual" })
      .then(function (r) {
        if (r.status === 401 || r.type === "opaqueredirect") {
          location.reload();
          return null;
        }
        if (!r.ok) {
          return null;
        }
        setPending(r.headers.get("X-Portcullis-Pending"));
        return r.text();
      })
      .then(function (html) {
        if (typeof html !== "string") {
          return;
        }
        if (busy()) {
          // The person started typing while the page was fetched.
          waiting = true;
          return;
        }
        main.innerHTML = html;
        main.setAttribute("data-version", String(Number(main.getAttribute("data-version") || "0") + 1));
        scheduleExpiry();
      })
      .catch(function () {})
      .then(function () {
        inflight = false;
        if (live.getAttribute("data-state") === "on" && !waiting) {
          live.textContent = "live";
        }
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  // A pending request that expires leaves the list without any change
  // event: refresh when the first one shown expires.
  function scheduleExpiry() {
    if (expiryTimer) {
      clearTimeout(expiryTimer);
      expiryTimer = null;
    }
    var first = Infinity;
    var els = main.querySelectorAll("[data-expires]");
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute("data-expires"));
      if (!isNaN(t) && t < first) {
        first = t;
      }
    }
    var wait = first - Date.now() + 1000;
    if (isFinite(wait) && wait < 86400000) {
      expiryTimer = setTimeout(refresh, Math.max(wait, 1000));
    }
  }

  function resume() {
    if (waiting && !busy()) {
      refresh();
    }
  }
  main.addEventListener("focusout", function () { setTimeout(resume, 0); });
  main.addEventListener("input", resume);

  var es = new EventSource("/events");
  es.addEventListener("open", function () {
    live.setAttribute("data-state", "on");
    live.textContent = "live";
    // Anything that changed before the stream opened is read now.
    refresh();
  });
  es.addEventListener("error", function () {
    live.setAttribute("data-state", "off");
    live.textContent = "reconnecting…";
  });
  es.addEventListener("pending", function (e) {
    setPending(e.data);
  });
  es.addEventListener("change", function (e) {
    var c;
    try {
      c = JSON.parse(e.data);
    } catch (err) {
      return;
    }
    if (c.kind === "resync" || kinds.indexOf(c.kind) >= 0) {
      refresh();
    }
  });
  scheduleExpiry();
})();
