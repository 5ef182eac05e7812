/* Message tree of agent_sessions' admin: lazy-loads branches and compacted ranges when their <details> opens. */
(function () {
  "use strict";

  function load(details) {
    if (details.dataset.loaded) { return; }
    details.dataset.loaded = "loading";
    var body = details.querySelector(":scope > .as-lazy-body");
    fetch(details.dataset.fragmentUrl, { credentials: "same-origin", headers: { "X-Requested-With": "XMLHttpRequest" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
        return response.text();
      })
      .then(function (html) {
        body.innerHTML = html;
        details.dataset.loaded = "yes";
      })
      .catch(function (error) {
        body.textContent = "Could not load: " + error.message;
        delete details.dataset.loaded;
      });
  }

  // "toggle" does not bubble, but a capturing listener on the document sees every <details>.
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details.open && details.matches && details.matches("details[data-fragment-url]")) { load(details); }
  }, true);

  // "load 500 at a time": the same <details>, loaded in larger steps.
  document.addEventListener("click", function (event) {
    var link = event.target.closest("[data-as-load]");
    if (!link) { return; }
    event.preventDefault();
    var details = link.closest("details[data-fragment-url]");
    if (!details) { return; }
    details.dataset.fragmentUrl = link.dataset.asLoad;
    delete details.dataset.loaded;
    if (details.open) { load(details); } else { details.open = true; }
  });

  // The selected leaf is scrolled into view inside the leaf list (the list scrolls, not the page).
  function showSelectedLeaf() {
    var item = document.querySelector(".as-leaves .as-selected-leaf");
    if (!item) { return; }
    var box = item.closest("ul");
    box.scrollTop = item.offsetTop - box.offsetTop - box.clientHeight / 2;
  }
  // A jump by id or time (a GET form, so no #fragment) still lands on the focused message.
  function showFocus() {
    var params = new URLSearchParams(location.search);
    if (location.hash || !(params.has("focus") || params.has("at"))) { return; }
    var row = document.querySelector("#as-tree li.as-msg.as-focus");
    if (row) { row.scrollIntoView({ block: "start" }); }
  }
  function ready() { showSelectedLeaf(); showFocus(); }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-as-toggle]");
    if (!button) { return; }
    var open = button.dataset.asToggle === "open";
    document.querySelectorAll("#as-tree details.as-tool").forEach(function (d) { d.open = open; });
  });
}());
