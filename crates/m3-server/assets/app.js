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
  var base = body.getAttribute("data-base") || "";
  var inbox = document.getElementById("inbox");

  function roundUrl(executionId, roundId) {
    return base + "/executions/" + encodeURIComponent(executionId) +
      "/rounds/" + encodeURIComponent(roundId);
  }

  function find(roundId) {
    if (!inbox) { return null; }
    var all = inbox.querySelectorAll("[data-round-id]");
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-round-id") === roundId) { return all[i]; }
    }
    return null;
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
    if (empty && inbox) { empty.hidden = inbox.querySelector("[data-round-id]") !== null; }
  }

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

  source.addEventListener("round.pending", function (event) {
    var data = JSON.parse(event.data);
    if (find(data.round_id)) { return; }
    fragment(data.execution_id, data.round_id).then(function (html) {
      var element = html && parse(html);
      if (!element || find(data.round_id)) { return; }
      if (element.getAttribute("data-round-status") !== "pending") { return; }
      inbox.insertBefore(element, inbox.firstElementChild);
      updateEmpty();
    });
  });

  function leave(element) {
    window.setTimeout(function () { element.remove(); updateEmpty(); }, 3000);
  }

  ["round.answered", "round.resolved", "round.failed"].forEach(function (kind) {
    source.addEventListener(kind, function (event) {
      var data = JSON.parse(event.data);
      var element = find(data.round_id);
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
