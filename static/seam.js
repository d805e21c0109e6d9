/* The console's one modal dialog (<dialog id="dialog"> in base.html).

   htmx swaps a confirmation, or a refusal, into the dialog; this opens it as a modal (the page
   behind is inert, Escape closes it), moves focus to its first field, and on closing empties it
   and gives focus back to the button that opened it, or to the page's heading when an action
   redrew that button. A form refused with a 400 comes back into the open dialog with what was
   typed, so nothing is lost. */
(function () {
  "use strict";

  let opener = null;

  function dialog() {
    return document.getElementById("dialog");
  }

  function firstField(root) {
    return root.querySelector(
      "[autofocus], textarea, select, input:not([type=hidden]):not([disabled]), button:not([disabled])"
    );
  }

  function giveFocusBack() {
    const back = opener && opener.isConnected ? opener : document.querySelector("main h1");
    opener = null;
    if (!back) return;
    if (!back.matches("a, button, input, select, textarea, [tabindex]")) back.setAttribute("tabindex", "-1");
    back.focus();
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    const d = dialog();
    if (d && event.detail.target === d && !d.open) opener = event.detail.elt;
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    const d = dialog();
    if (!d || event.detail.target !== d) return;
    if (!d.firstElementChild) {
      if (d.open) d.close();
      return;
    }
    if (!d.open) d.showModal();
    const field = firstField(d);
    if (field) field.focus();
  });

  /* An action confirmed in the dialog redrew the run: the dialog's work is done. */
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (!(form instanceof Element) || !form.matches("[data-closes-on-success]")) return;
    const d = form.closest("dialog");
    if (d && event.detail.successful && event.detail.target.id !== "dialog") d.close();
  });

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-close-dialog]") : null;
    if (!button) return;
    const d = button.closest("dialog");
    if (d) d.close();
    else button.closest(".confirm")?.remove();
  });

  document.addEventListener("DOMContentLoaded", function () {
    const d = dialog();
    if (!d) return;
    d.addEventListener("close", function () {
      d.replaceChildren();
      giveFocusBack();
    });
    /* A click on the backdrop (outside the dialog's box) closes it, as Escape does. */
    d.addEventListener("click", function (event) {
      if (event.target !== d) return;
      const box = d.getBoundingClientRect();
      const inside =
        event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
      if (!inside) d.close();
    });
  });
})();

/* A background refresh that fails (the server unreachable: htmx:sendError; an error answer:
   htmx:responseError) leaves the page showing what may no longer be true: say so, with a link
   that reloads it. A later refresh that works takes the notice away again. */
(function () {
  "use strict";

  function stale(on) {
    const notice = document.getElementById("stale");
    if (notice) notice.hidden = !on;
  }

  document.addEventListener("htmx:sendError", function () { stale(true); });
  document.addEventListener("htmx:responseError", function () { stale(true); });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) stale(false);
  });
})();
