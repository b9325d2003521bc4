// Progressive behaviour of the schema administrator page; the page works without it.
(function () {
  "use strict";
  var form = document.getElementById("selection");
  if (form) {
    var boxes = form.querySelectorAll("input[name=databases]");
    var message = document.getElementById("selection-message");
    var selectors = form.querySelector(".selectors");
    if (selectors) { selectors.hidden = false; }
    var setAll = function (checked) {
      for (var i = 0; i < boxes.length; i++) { boxes[i].checked = checked; }
      message.hidden = true;
    };
    document.getElementById("select-all").addEventListener("click", function () { setAll(true); });
    document.getElementById("select-none").addEventListener("click", function () { setAll(false); });
    form.addEventListener("submit", function (event) {
      if (!form.querySelector("input[name=databases]:checked")) {
        event.preventDefault();
        message.textContent = form.getAttribute("data-empty-message");
        message.hidden = false;
      }
    });
  }

  var panel = document.getElementById("operation");
  if (!panel || panel.getAttribute("data-live") !== "true" || panel.getAttribute("data-terminal") === "true") {
    return;
  }
  var id = panel.getAttribute("data-operation");
  var shown = panel.getAttribute("data-state");
  var field = function (name) { return panel.querySelector("[data-field=" + name + "]"); };
  var row = function (cells) {
    var tr = document.createElement("tr");
    cells.forEach(function (text) {
      var td = document.createElement("td");
      td.textContent = text == null ? "" : String(text);
      tr.appendChild(td);
    });
    return tr;
  };
  var fill = function (body, rows) {
    if (!body) { return; }
    while (body.firstChild) { body.removeChild(body.firstChild); }
    rows.forEach(function (cells) { body.appendChild(row(cells)); });
  };
  var counts = function (map) {
    return Object.keys(map || {}).map(function (k) { return map[k] + " " + k; }).join(", ");
  };
  var render = function (view) {
    field("state").textContent = view.state;
    field("lease").textContent = view.lease ? view.lease.status + " until " + view.lease.expires_at : "not held";
    var error = field("error");
    error.hidden = !view.error;
    error.textContent = view.error ? view.error.code + ": " + view.error.message : "";
    fill(field("databases"), (view.databases || []).map(function (d) {
      return [d.name, d.state, d.outcome, d.freshness, counts(d.object_counts), d.error ? d.error.message : ""];
    }));
    fill(field("steps"), (view.steps || []).map(function (s) {
      return [s.key, s.state, s.attempts, s.error ? s.error.message : ""];
    }));
  };
  var poll = function () {
    fetch("/api/v1/schema/operations/" + encodeURIComponent(id), {
      credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" }
    }).then(function (answer) {
      return answer.ok ? answer.json() : null;
    }).then(function (view) {
      if (view) {
        render(view);
        // A new state with new controls (the review, the final report): the server renders it.
        if (view.state !== shown && (view.terminal || view.state === "awaiting_review")) {
          window.location.reload();
          return;
        }
      }
      window.setTimeout(poll, 1500);
    }, function () { window.setTimeout(poll, 1500); });
  };
  window.setTimeout(poll, 1500);
})();
