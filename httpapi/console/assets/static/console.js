// Portcullis console: the session's credential, and live updates. No
// framework, no inline script.
//
// The credential never travels as a cookie: a browser sends a host's
// cookies to every port of it, so a page an agent serves on another port
// would receive them. Logging in hands the credential to this script, which
// keeps it in the console's origin's localStorage (no other port or host
// name can read it) and sends it as the X-Portcullis-Session header with
// every request: the page itself (a navigation only gets the page's frame),
// every form, every live refresh and the event stream. A request without
// it can neither act nor read anything.
(function () {
  "use strict";
  var KEY = "portcullis.session";
  var HEADER = "X-Portcullis-Session";
  if (!window.fetch || !window.DOMParser || !window.URLSearchParams) {
    return;
  }

  function credential() {
    try {
      return window.localStorage.getItem(KEY) || "";
    } catch (err) {
      return "";
    }
  }

  function keep(value) {
    try {
      window.localStorage.setItem(KEY, value);
      return true;
    } catch (err) {
      return false;
    }
  }

  // mine is the credential this page was opened with: its forms carry
  // that session's CSRF token, so the page keeps to it even when another
  // tab logs in again.
  var mine = credential();

  // forget drops the stored credential when it is still this page's (a
  // login in another tab may have replaced it).
  function forget() {
    try {
      if (window.localStorage.getItem(KEY) === mine) {
        window.localStorage.removeItem(KEY);
      }
    } catch (err) {}
  }

  var leaving = false;

  // toLogin leaves a page whose session the console no longer knows: for
  // the login, which comes back here — or, when another tab has logged in
  // since, for this page again with that tab's credential.
  function toLogin() {
    if (leaving) {
      return;
    }
    leaving = true;
    var now = credential();
    if (now && now !== mine) {
      location.reload();
      return;
    }
    forget();
    location.replace("/login?next=" + encodeURIComponent(location.pathname + location.search));
  }

  function withCredential(headers) {
    var h = {};
    h[HEADER] = mine;
    for (var k in headers || {}) {
      h[k] = headers[k];
    }
    return h;
  }

  // The answer to the login form: keep the credential, open the page.
  var handed = document.getElementById("session");
  if (handed) {
    if (!keep(handed.getAttribute("data-session") || "")) {
      handed.textContent = "This browser does not let the console keep your login (site data is blocked for it). Allow site data for this address and log in again.";
      handed.className = "flash error";
      return;
    }
    handed.removeAttribute("data-session");
    location.replace(handed.getAttribute("data-next") || "/approvals");
    return;
  }

  // ---- live updates ----

  var baseTitle = "";
  var streamState = "off", started = false;
  var inflight = false, again = false, waiting = false, expiryTimer = null;

  function main() {
    return document.getElementById("main");
  }

  function kinds() {
    var m = main();
    return ((m && m.getAttribute("data-live")) || "").split(" ").filter(Boolean);
  }

  function setLive(state, label) {
    streamState = state;
    var live = document.getElementById("live-status");
    if (live) {
      live.setAttribute("data-state", state);
      live.textContent = label;
    }
  }

  function setPending(n) {
    var badge = document.getElementById("pending-count");
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
    var m = main();
    if (!m) {
      return false;
    }
    var el = document.activeElement;
    if (el && m.contains(el) && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) && el.type !== "submit") {
      return true;
    }
    var fields = m.querySelectorAll("input[type=text], input[type=search], textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value) {
        return true;
      }
    }
    return false;
  }

  // refresh fetches the page's main region again.
  function refresh() {
    if (!kinds().length || leaving) {
      return;
    }
    if (busy()) {
      waiting = true;
      setLive(streamState, "live · paused while you type");
      return;
    }
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    waiting = false;
    var href = location.href;
    fetch(href, { headers: withCredential({ "X-Portcullis-Fragment": "1" }), cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          toLogin();
          return null;
        }
        if (!r.ok || r.redirected) {
          return null;
        }
        setPending(r.headers.get("X-Portcullis-Pending"));
        return r.text();
      })
      .then(function (html) {
        var m = main();
        if (typeof html !== "string" || !m || location.href !== href) {
          return;
        }
        if (busy()) {
          // The person started typing while the page was fetched.
          waiting = true;
          return;
        }
        if (hold(m, html)) {
          return;
        }
        if (html === shownHTML && m === shownMain && held === null) {
          // Nothing changed (a change is often heard twice: its notice,
          // then the store's feed): redrawing would only take the
          // element under the pointer away mid-click.
          return;
        }
        put(m, html);
      })
      .catch(function () {})
      .then(function () {
        inflight = false;
        if (streamState === "on" && !waiting) {
          setLive("on", "live");
        }
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  // put replaces the main region with a refreshed one.
  // shownHTML is what put last drew into shownMain.
  var shownHTML = null;
  var shownMain = null;

  function put(m, html) {
    held = null;
    shownHTML = html;
    shownMain = m;
    var bar = document.getElementById("new-requests");
    if (bar) {
      bar.parentNode.removeChild(bar);
      document.body.classList.remove("has-new-bar");
    }
    m.innerHTML = html;
    m.setAttribute("data-version", String(Number(m.getAttribute("data-version") || "0") + 1));
    scheduleExpiry();
  }

  // ---- nothing moves under the pointer ----
  //
  // A list of requests is not redrawn under the person's finger: when a
  // refresh would add a request or take one away, the cards shown stay
  // where they are (a request answered elsewhere or expired is greyed out
  // and its buttons disabled), and a bar fixed to the bottom of the
  // screen says what changed; tapping it shows the new list. Every button
  // posts to its own request's address, so a tap acts only on the request
  // whose card it is in.
  var held = null;

  function ids(root) {
    var out = [];
    var els = root.querySelectorAll("[data-approval]");
    for (var i = 0; i < els.length; i++) {
      out.push(els[i].getAttribute("data-approval"));
    }
    return out;
  }

  // hold keeps a refreshed list that would move the cards shown, and
  // reports whether it did.
  function hold(m, html) {
    var shown = ids(m);
    if (!shown.length) {
      return false;
    }
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    var next = ids(tpl.content);
    var added = next.filter(function (id) { return shown.indexOf(id) < 0; });
    var gone = shown.filter(function (id) { return next.indexOf(id) < 0; });
    if (!added.length && !gone.length) {
      return false;
    }
    held = html;
    gone.forEach(function (id) {
      var card = m.querySelector('[data-approval="' + id + '"]');
      if (card && !card.hasAttribute("data-gone")) {
        card.setAttribute("data-gone", "");
        card.setAttribute("title", "No longer waiting: answered elsewhere or expired");
        var buttons = card.querySelectorAll("button, input");
        for (var i = 0; i < buttons.length; i++) {
          buttons[i].disabled = true;
        }
      }
    });
    var parts = [];
    if (added.length) {
      parts.push(added.length + " new " + (added.length === 1 ? "request" : "requests"));
    }
    if (gone.length) {
      parts.push(gone.length + " no longer waiting");
    }
    var bar = document.getElementById("new-requests");
    if (!bar) {
      bar = document.createElement("button");
      bar.type = "button";
      bar.id = "new-requests";
      bar.className = "new-bar";
      bar.addEventListener("click", function () {
        var mm = main();
        if (held !== null && mm) {
          put(mm, held);
          window.scrollTo(0, 0);
        }
      });
      document.body.appendChild(bar);
      // Room below the last card, so the bar never covers its buttons.
      document.body.classList.add("has-new-bar");
    }
    bar.setAttribute("data-new", String(added.length));
    bar.textContent = parts.join(", ") + " · show";
    return true;
  }

  // A pending request that expires leaves the list without any change
  // event: refresh when the first one shown expires.
  function scheduleExpiry() {
    if (expiryTimer) {
      clearTimeout(expiryTimer);
      expiryTimer = null;
    }
    var m = main();
    if (!m) {
      return;
    }
    var first = Infinity;
    var els = m.querySelectorAll("[data-expires]");
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

  function resume(ev) {
    var m = main();
    if (m && m.contains(ev.target) && waiting && !busy()) {
      refresh();
    }
  }
  document.addEventListener("focusout", function (ev) { setTimeout(function () { resume(ev); }, 0); });
  document.addEventListener("input", resume);

  // dispatch handles one server-sent event.
  function dispatch(event, data) {
    if (event === "pending") {
      setPending(data);
      return;
    }
    if (event !== "change") {
      return;
    }
    var c;
    try {
      c = JSON.parse(data);
    } catch (err) {
      return;
    }
    if (c.kind === "resync" || kinds().indexOf(c.kind) >= 0) {
      refresh();
    }
  }

  // connect reads the event stream with fetch, which can send the
  // credential (EventSource cannot send a header), and reconnects when it
  // ends. The stream ends with the session: the reconnection's 401 opens
  // the login.
  var retry = 3000;
  function connect() {
    if (leaving) {
      return;
    }
    fetch("/events", { headers: withCredential({ Accept: "text/event-stream" }), cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          toLogin();
          return null;
        }
        if (!r.ok || !r.body) {
          throw new Error("event stream: " + r.status);
        }
        setLive("on", "live");
        // Anything that changed before the stream opened is read now.
        refresh();
        var reader = r.body.getReader(), decoder = new TextDecoder(), buf = "";
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) {
              return null;
            }
            buf += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
            var end;
            while ((end = buf.indexOf("\n\n")) >= 0) {
              var block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              var event = "message", data = [];
              block.split("\n").forEach(function (line) {
                var i = line.indexOf(":");
                var field = i < 0 ? line : line.slice(0, i);
                var value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
                if (field === "event") {
                  event = value;
                } else if (field === "data") {
                  data.push(value);
                } else if (field === "retry" && /^\d+$/.test(value)) {
                  retry = Number(value);
                }
              });
              if (data.length) {
                dispatch(event, data.join("\n"));
              }
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {})
      .then(function () {
        if (leaving) {
          return;
        }
        setLive("off", "reconnecting…");
        setTimeout(connect, retry);
      });
  }

  // ---- pages and forms, with the credential ----

  // show puts a page the console answered in place of this one (its body
  // and title); url is its address when it differs (a form's redirect).
  function show(html, url) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    if (!doc.body) {
      return;
    }
    var drop = doc.querySelectorAll("noscript, script");
    for (var i = 0; i < drop.length; i++) {
      drop[i].parentNode.removeChild(drop[i]);
    }
    if (url && url !== location.href) {
      // The page a form's redirect led to (after an action, POST,
      // redirect, GET): its address replaces the form's page's.
      history.replaceState(null, "", url);
    }
    document.title = doc.title;
    baseTitle = doc.title.replace(/^\(\d+\) /, "");
    document.body.replaceWith(document.adoptNode(doc.body));
    if (streamState === "on") {
      setLive("on", "live");
    }
    scheduleExpiry();
    if (document.getElementById("live-status") && !started) {
      started = true;
      connect();
    }
  }

  // open fetches a console page with the credential and shows it.
  function open(url, init) {
    init.headers = withCredential(init.headers);
    init.cache = "no-store";
    return fetch(url, init)
      .then(function (r) {
        if (r.status === 401) {
          toLogin();
          return;
        }
        return r.text().then(function (html) {
          if (new URL(r.url).pathname === "/login") {
            // Logged out (or the session ended): the login, without the
            // credential.
            leaving = true;
            forget();
            location.replace(r.url);
            return;
          }
          show(html, r.redirected ? r.url : null);
        });
      })
      .catch(function () {
        var m = main();
        if (m) {
          m.innerHTML = "";
          var p = document.createElement("p");
          p.className = "flash error";
          p.id = "error-message";
          p.textContent = "The console cannot be reached. Reload the page to try again.";
          m.appendChild(p);
        }
      });
  }

  // Every form that posts is sent with the credential; the page it leads
  // to (the console redirects after an action) replaces this one.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form || (form.getAttribute("method") || "get").toLowerCase() !== "post" || form.id === "login-form") {
      return;
    }
    ev.preventDefault();
    var body = new URLSearchParams();
    var fields = new FormData(form);
    fields.forEach(function (value, name) {
      body.append(name, String(value));
    });
    var by = ev.submitter;
    if (by && by.name) {
      body.append(by.name, by.value);
    }
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = true;
    }
    open(form.action, { method: "POST", body: body });
  });

  // A page opened by a navigation is only its frame: fetch it with the
  // credential, or log in first.
  if (document.getElementById("shell")) {
    if (!mine) {
      toLogin();
      return;
    }
    open(location.href, {});
  }
})();
