// A background refresh that fails (the server unreachable: htmx:sendError; an error answer:
// htmx:responseError) leaves the page showing what may no longer be true: say so, with a link
// that reloads it. A later refresh that works takes the notice away again.
(function () {
  function stale(on) {
    var notice = document.getElementById("stale");
    if (notice) notice.hidden = !on;
  }
  document.addEventListener("htmx:sendError", function () { stale(true); });
  document.addEventListener("htmx:responseError", function () { stale(true); });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) stale(false);
  });
})();
