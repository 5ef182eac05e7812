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

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-as-toggle]");
    if (!button) { return; }
    var open = button.dataset.asToggle === "open";
    document.querySelectorAll("#as-tree details.as-tool").forEach(function (d) { d.open = open; });
  });
}());
