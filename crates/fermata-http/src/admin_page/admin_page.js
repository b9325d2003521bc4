// Progressive behaviour of the schema administrator page; the page works without it.
(function () {
  "use strict";
  var form = document.getElementById("selection");
  if (form) {
    var boxes = form.querySelectorAll("input[name=databases]");
    var message = document.getElementById("selection-message");
    var selectors = form.querySelector(".selectors");
    if (selectors) { selectors.hidden = false; }
    var rowOf = function (box) { return box.closest("tr"); };
    // Checks exactly the boxes `wanted` says yes to, among the rows the filter shows.
    var select = function (wanted) {
      for (var i = 0; i < boxes.length; i++) {
        var row = rowOf(boxes[i]);
        boxes[i].checked = !row.hidden && wanted(row);
      }
      message.hidden = true;
    };
    var button = function (id, wanted) {
      document.getElementById(id).addEventListener("click", function () { select(wanted); });
    };
    button("select-all", function () { return true; });
    button("select-none", function () { return false; });
    button("select-stale", function (row) { return row.getAttribute("data-freshness") === "stale"; });
    button("select-drifted", function (row) { return row.getAttribute("data-drifted") === "true"; });
    // The filter hides the rows whose name does not contain its text (any case); a hidden row
    // is never left selected.
    var filter = document.getElementById("inventory-filter");
    filter.addEventListener("input", function () {
      var text = filter.value.toLowerCase();
      var rows = form.querySelectorAll("#inventory-rows tr");
      for (var i = 0; i < rows.length; i++) {
        var name = (rows[i].getAttribute("data-name") || "").toLowerCase();
        rows[i].hidden = text !== "" && name.indexOf(text) < 0;
        var box = rows[i].querySelector("input[name=databases]");
        if (box && rows[i].hidden) { box.checked = false; }
      }
    });
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
  var shownHeld = shown === "publishing" && !field("error").hidden;
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
  // An instant as the server draws it (see view/time.rs): a <time> carrying it exactly, its
  // text relative to now. The lease's expiry is always within hours of now.
  var timeElement = function (iso) {
    var element = document.createElement("time");
    var minutes = Math.trunc((Date.parse(iso) - Date.now()) / 60000);
    var count = Math.abs(minutes) < 60 ? Math.abs(minutes) : Math.trunc(Math.abs(minutes) / 60);
    var unit = (Math.abs(minutes) < 60 ? "minute" : "hour") + (count === 1 ? "" : "s");
    element.dateTime = iso;
    element.title = new Date(iso).toUTCString();
    element.textContent = isNaN(minutes) ? iso : minutes === 0 ? "just now"
      : minutes > 0 ? "in " + count + " " + unit : count + " " + unit + " ago";
    return element;
  };
  var counts = function (map) {
    return Object.keys(map || {}).map(function (k) { return map[k] + " " + k; }).join(", ");
  };
  var render = function (view) {
    field("state").textContent = view.state;
    var lease = field("lease");
    lease.textContent = view.lease ? view.lease.status + ", expires " : "not held";
    if (view.lease) { lease.appendChild(timeElement(view.lease.expires_at)); }
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
        // A publication that failed and waits to be published again has its own controls too.
        var held = view.state === "publishing" && !!view.error;
        if ((view.state !== shown && (view.terminal || view.state === "awaiting_review")) || (held && !shownHeld)) {
          window.location.reload();
          return;
        }
      }
      window.setTimeout(poll, 1500);
    }, function () { window.setTimeout(poll, 1500); });
  };
  window.setTimeout(poll, 1500);
})();
