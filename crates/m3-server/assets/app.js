// m3 answer page: the live inbox and in-place answers. Without this script
// the page still works: forms post and the server answers with a page.
// Every fragment inserted here is HTML the server rendered and escaped.
(function () {
  "use strict";
  var body = document.body;
  document.documentElement.classList.add("js");

  // A secret field's "Show" button: the typed text becomes visible until pressed again.
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.reveal") : null;
    if (!button) { return; }
    var input = document.getElementById(button.getAttribute("data-reveal"));
    if (!input) { return; }
    var shown = input.type === "password";
    input.type = shown ? "text" : "password";
    button.setAttribute("aria-pressed", shown ? "true" : "false");
    button.textContent = shown ? "Hide" : "Show";
  });
  // Each deadline's countdown ("12 min left"), rendered by the server and kept current
  // here (same wording as the server's); new lines the live inbox adds are found on the
  // next tick.
  function timeLeft(seconds) {
    if (seconds <= 0) { return "deadline passed"; }
    if (seconds < 60) { return seconds + " s left"; }
    if (seconds < 3600) { return Math.floor(seconds / 60) + " min left"; }
    if (seconds < 86400) {
      return Math.floor(seconds / 3600) + " h " + Math.floor(seconds % 3600 / 60) + " min left";
    }
    return Math.floor(seconds / 86400) + " d " + Math.floor(seconds % 86400 / 3600) + " h left";
  }
  function tick() {
    var all = document.querySelectorAll("[data-deadline]");
    for (var i = 0; i < all.length; i++) {
      var at = Date.parse(all[i].getAttribute("data-deadline"));
      if (isNaN(at)) { continue; }
      var seconds = Math.floor((at - Date.now()) / 1000);
      var text = timeLeft(seconds);
      if (all[i].textContent !== text) { all[i].textContent = text; }
      all[i].setAttribute("data-passed", seconds <= 0 ? "true" : "false");
    }
  }
  window.setInterval(tick, 1000);
  tick();

  var base = body.getAttribute("data-base") || "";
  var inbox = document.getElementById("inbox");

  function roundUrl(executionId, roundId) {
    return base + "/executions/" + encodeURIComponent(executionId) +
      "/rounds/" + encodeURIComponent(roundId);
  }

  function findIn(attribute, roundId) {
    if (!inbox) { return null; }
    var all = inbox.querySelectorAll("[" + attribute + "]");
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute(attribute) === roundId) { return all[i]; }
    }
    return null;
  }

  // A round's form (or status) element, and its summary line in the inbox list.
  function find(roundId) { return findIn("data-round-id", roundId); }
  function item(roundId) { return findIn("data-inbox-round", roundId); }

  // The count in the heading and the tab title ("(3) Pending rounds · m3").
  function count(delta) {
    var shown = document.getElementById("count");
    if (!shown) { return; }
    var n = Math.max(0, parseInt(shown.getAttribute("data-count"), 10) + delta);
    shown.setAttribute("data-count", String(n));
    shown.textContent = "(" + n + ")";
    document.title = document.title.replace(/^\(\d+\)/, "(" + n + ")");
  }

  function parse(html) {
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function fragment(executionId, roundId) {
    return fetch(roundUrl(executionId, roundId), {
      credentials: "same-origin",
      headers: { "X-M3-Fragment": "1" }
    }).then(function (response) { return response.ok ? response.text() : null; });
  }

  function updateEmpty() {
    var empty = document.getElementById("empty");
    if (empty && inbox) {
      empty.hidden = inbox.querySelector("[data-round-id], [data-inbox-round]") !== null;
    }
  }

  // Selecting a round in the list opens its form below its line (the link is the
  // round's page, which is where it goes without this script); selecting again closes it.
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.open") : null;
    var line = link && link.closest("li[data-inbox-round]");
    if (!line || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
    event.preventDefault();
    var open = line.querySelector("[data-round-id]");
    if (open) {
      open.remove();
      link.setAttribute("aria-expanded", "false");
      return;
    }
    fragment(line.getAttribute("data-execution-id"), line.getAttribute("data-inbox-round"))
      .then(function (html) {
        var element = html && parse(html);
        if (!element || line.querySelector("[data-round-id]")) { return; }
        line.appendChild(element);
        link.setAttribute("aria-expanded", "true");
        var first = element.querySelector("input:not([type=hidden]), select, textarea");
        if (first) { first.focus(); }
      });
  });

  // Submit in place: the server answers with the round's new element (its
  // status, or the form again with the errors next to the fields).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-round-id]")) { return; }
    event.preventDefault();
    var button = form.querySelector("button[type=submit]");
    if (button) { button.disabled = true; }
    fetch(form.action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-M3-Fragment": "1" },
      body: new URLSearchParams(new FormData(form))
    }).then(function (response) { return response.text(); })
      .then(function (html) {
        var element = parse(html);
        if (element && element.hasAttribute("data-round-id")) {
          form.replaceWith(element);
          var invalid = element.querySelector("[aria-invalid=true]");
          if (invalid) { invalid.focus(); }
        } else if (button) {
          button.disabled = false;
        }
      })
      .catch(function () { if (button) { button.disabled = false; } });
  });

  if (!inbox || !window.EventSource || !body.hasAttribute("data-events")) { return; }
  var url = body.getAttribute("data-events");
  var cursor = body.getAttribute("data-cursor");
  if (cursor) { url += "?after=" + encodeURIComponent(cursor); }
  var source = new EventSource(url, { withCredentials: true });
  // Leaving the page ends the stream at once: a browser allows few connections per
  // host, and a stream left open would hold one while the next page loads.
  window.addEventListener("pagehide", function () { source.close(); });

  // New rounds join the top of the plain first page (newest first, no filter); other
  // views keep their rounds until reloaded.
  var live = inbox.getAttribute("data-live") === "true";
  source.addEventListener("round.pending", function (event) {
    var data = JSON.parse(event.data);
    if (!live || item(data.round_id)) { return; }
    fetch(roundUrl(data.execution_id, data.round_id), {
      credentials: "same-origin",
      headers: { "X-M3-Fragment": "item" }
    }).then(function (response) { return response.status === 200 ? response.text() : null; })
      .then(function (html) {
        var element = html && parse(html);
        if (!element || item(data.round_id)) { return; }
        inbox.insertBefore(element, inbox.firstElementChild);
        count(1);
        updateEmpty();
      });
  });

  function leave(element) {
    window.setTimeout(function () {
      var line = element.closest("li[data-inbox-round]") || element;
      line.remove();
      updateEmpty();
    }, 3000);
  }

  ["round.answered", "round.resolved", "round.failed"].forEach(function (kind) {
    source.addEventListener(kind, function (event) {
      var data = JSON.parse(event.data);
      var line = item(data.round_id);
      if (line && !line.hasAttribute("data-left")) {
        line.setAttribute("data-left", "true");
        count(-1);
      }
      var element = find(data.round_id);
      if (!element && line) {
        line.setAttribute("data-round-status", data.round ? data.round.status : "answered");
        if (kind !== "round.answered") { leave(line); }
        return;
      }
      if (!element) { return; }
      if (element.tagName === "FORM") {
        // Answered elsewhere: show its status instead of a stale form.
        fragment(data.execution_id, data.round_id).then(function (html) {
          var fresh = html && parse(html);
          if (fresh && element.isConnected) {
            element.replaceWith(fresh);
            if (kind !== "round.answered") { leave(fresh); }
          }
        });
        return;
      }
      var status = data.round ? data.round.status : "";
      element.setAttribute("data-round-status", status);
      var shown = element.querySelector("[role=status] strong");
      if (shown) { shown.textContent = status; }
      if (kind !== "round.answered") { leave(element); }
    });
  });
})();
