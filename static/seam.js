/* Focus through redraws. htmx replaces a region (a poll every few seconds, an action's answer)
   and the element that had focus goes with it: the browser puts focus back on <body>, so a
   keyboard user starts again from the top of the page and Enter does nothing. Before a swap
   this notes what had focus in the region, by what it is rather than by the node: its row (the
   nearest element with a data-ticket or an id) and the control's own name. After the swap it
   focuses the same control in the new markup; if that control is gone (the action it did is no
   longer offered), its row; if the row is gone too (the run left the list), the row now in its
   place; else the region's heading. window.seamFocus lets the dialog's code below do the same
   for the button that opened it. */
(function () {
  "use strict";

  const FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]";
  const PLACE = "[data-ticket], [id]";

  function rowsOf(region) {
    return Array.prototype.slice.call(region.querySelectorAll("[data-ticket]"));
  }

  function selectorOf(el) {
    if (el.hasAttribute("data-ticket")) return '[data-ticket="' + CSS.escape(el.getAttribute("data-ticket")) + '"]';
    return "#" + CSS.escape(el.id);
  }

  // A control is "the same" when it is the same kind of thing with the same name and words: a
  // button's value or an input's state may have changed with the run.
  function signature(el) {
    return [el.tagName, el.getAttribute("name"), el.getAttribute("href"), el.getAttribute("aria-label"),
            (el.textContent || "").trim()].join("|");
  }

  function describe(el, region) {
    if (el.id && el !== region) return { id: el.id, region: region.id };
    const holder = el.closest(PLACE);
    const place = holder && holder !== region && region.contains(holder) ? holder : null;
    return {
      place: place ? selectorOf(place) : null,
      self: el === place,
      what: signature(el),
      row: place && place.hasAttribute("data-ticket") ? rowsOf(region).indexOf(place) : -1,
    };
  }

  function headingOf(el) {
    return el.querySelector("h1, h2, h3") || el;
  }

  function find(key, region) {
    if (key.id) return document.getElementById(key.id) || headingOf(region);
    const place = key.place ? region.querySelector(key.place) : region;
    if (place) {
      if (key.self) return place;
      const same = Array.prototype.find.call(place.querySelectorAll(FOCUSABLE), function (el) {
        return !el.disabled && signature(el) === key.what;
      });
      if (same) return same;
      if (key.place) return place.hasAttribute("data-ticket") ? place : headingOf(place);
    }
    const rows = rowsOf(region);
    if (key.row >= 0 && rows.length) return rows[Math.min(key.row, rows.length - 1)];
    return headingOf(region);
  }

  function give(el) {
    if (!el.matches(FOCUSABLE)) el.setAttribute("tabindex", "-1");
    el.focus({ preventScroll: true });
  }

  window.seamFocus = { describe: describe, find: find, give: give };

  let kept = null;

  document.addEventListener("htmx:beforeSwap", function (event) {
    const region = event.detail.target;
    const active = document.activeElement;
    kept = null;
    // The dialog (below) moves focus into itself and back to its opener on its own.
    if (!region || !region.id || region.closest("dialog")) return;
    if (active && active !== document.body && region.contains(active)) {
      kept = { region: region.id, key: describe(active, region) };
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (!kept) return;
    const key = kept.key;
    const region = document.getElementById(kept.region);
    kept = null;
    // Something already took focus (htmx itself, for an element with an id; autofocus).
    if (!region || (document.activeElement && document.activeElement !== document.body)) return;
    give(find(key, region));
  });
})();

/* The console's one modal dialog (<dialog id="dialog"> in base.html).

   htmx swaps a confirmation, or a refusal, into the dialog; this opens it as a modal (the page
   behind is inert, Escape closes it), moves focus to its first field, and on closing empties it
   and gives focus back to the button that opened it, or to the page's heading when an action
   redrew that button. A form refused with a 400 comes back into the open dialog with what was
   typed, so nothing is lost. */
(function () {
  "use strict";

  let opener = null;
  let openerPlace = null; // where the opener was, to find its like if an action redrew it

  function dialog() {
    return document.getElementById("dialog");
  }

  function firstField(root) {
    return root.querySelector(
      "[autofocus], textarea, select, input:not([type=hidden]):not([disabled]), button:not([disabled])"
    );
  }

  function giveFocusBack() {
    const main = document.querySelector("main");
    let back = opener && opener.isConnected ? opener : null;
    if (!back && openerPlace && main) back = window.seamFocus.find(openerPlace, main);
    back = back || document.querySelector("main h1");
    opener = openerPlace = null;
    if (back) window.seamFocus.give(back);
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    const d = dialog();
    const main = document.querySelector("main");
    if (d && event.detail.target === d && !d.open) {
      opener = event.detail.elt;
      openerPlace = main && main.contains(opener) ? window.seamFocus.describe(opener, main) : null;
    }
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

  /* Nothing typed is lost by a slip: while a field of the dialog holds text the person typed (or
     kept from a refused try), Escape, a click outside and Cancel ask first, inside the dialog,
     whether to discard it; "Keep editing" goes back to the field. Only "Discard" or an action
     done closes it with the text. A close the browser forces anyway (a second Escape with no
     key pressed between, which Chromium does not let a page cancel) opens it again, asking. */
  let discarding = false;

  function typed(d) {
    return Array.prototype.some.call(
      d.querySelectorAll("textarea:not([readonly]), input[type=text], input[type=search], input:not([type])"),
      function (el) {
        // A field drawn holding a recorded value (an argument to edit) counts once it differs.
        if (el.dataset.recorded !== undefined) return el.value !== el.dataset.recorded;
        return el.value.trim() !== "";
      }
    );
  }

  function askOf(d) {
    return d.querySelector(".discard-ask");
  }

  let editing = null; // the field that had focus when the question was asked

  function keepEditing(d) {
    const ask = askOf(d);
    if (ask) ask.remove();
    const field = editing && d.contains(editing) ? editing : firstField(d);
    editing = null;
    if (field) field.focus();
  }

  function ask(d) {
    if (askOf(d)) {
      askOf(d).querySelector("button").focus();
      return;
    }
    const active = document.activeElement;
    editing = active && d.contains(active) && active.matches("textarea, input, select") ? active : null;
    const box = document.createElement("div");
    box.className = "discard-ask";
    box.setAttribute("role", "alertdialog");
    box.setAttribute("aria-labelledby", "discard-ask-words");
    const words = document.createElement("p");
    words.id = "discard-ask-words";
    words.textContent = "Discard what you typed?";
    const keep = document.createElement("button");
    keep.type = "button";
    keep.className = "primary";
    keep.textContent = "Keep editing";
    keep.addEventListener("click", function () { keepEditing(d); });
    const discard = document.createElement("button");
    discard.type = "button";
    discard.textContent = "Discard";
    discard.addEventListener("click", function () { closeDialog(d, true); });
    box.append(words, keep, " ", discard);
    (d.querySelector(".confirm") || d).prepend(box);
    keep.focus();
  }

  function closeDialog(d, force) {
    if (!force && typed(d)) {
      ask(d);
      return;
    }
    discarding = true;
    d.close();
  }

  /* An action confirmed in the dialog redrew the run: the dialog's work is done. */
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (!(form instanceof Element) || !form.matches("[data-closes-on-success]")) return;
    const d = form.closest("dialog");
    if (d && event.detail.successful && event.detail.target.id !== "dialog") closeDialog(d, true);
  });

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-close-dialog]") : null;
    if (!button) return;
    const d = button.closest("dialog");
    if (d) closeDialog(d, false);
    else button.closest(".confirm")?.remove();
  });

  document.addEventListener("DOMContentLoaded", function () {
    const d = dialog();
    if (!d) return;
    d.addEventListener("cancel", function (event) {
      if (discarding || !typed(d)) return;
      event.preventDefault();
      if (askOf(d)) keepEditing(d); // Escape on the question: keep editing
      else ask(d);
    });
    d.addEventListener("close", function () {
      if (!discarding && typed(d)) {
        d.showModal();
        ask(d);
        return;
      }
      discarding = false;
      d.replaceChildren();
      giveFocusBack();
    });
    /* A click on the backdrop (outside the dialog's box) closes it, as Escape does. */
    d.addEventListener("click", function (event) {
      if (event.target !== d) return;
      const box = d.getBoundingClientRect();
      const inside =
        event.clientX >= box.left && event.clientX <= box.right && event.clientY >= box.top && event.clientY <= box.bottom;
      if (!inside) closeDialog(d, false);
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

/* The dead-letter page. A button with data-opens-dialog="<template id>" asks first in the
   page's native <dialog>: the template (drawn with the letter, carrying the state the page
   showed) is copied into #dialog, given to htmx, opened as a modal, and focus goes to its first
   field; closing it gives focus back to the button. seamLettersBusy() pauses the page's poll
   while a person is using a form on it, so a redraw never takes what they are typing. */
(function () {
  "use strict";

  let opener = null;

  window.seamLettersBusy = function () {
    const d = document.getElementById("dialog");
    if (d && d.open) return true;
    const active = document.activeElement;
    const letters = document.getElementById("letters");
    return Boolean(letters && active && letters.contains(active) && active.matches("input, select, textarea"));
  };

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-opens-dialog]") : null;
    const d = document.getElementById("dialog");
    if (!button || !d) return;
    const template = document.getElementById(button.getAttribute("data-opens-dialog"));
    if (!template) return;
    opener = { id: button.closest("[id]") ? button.closest("[id]").id : null, what: button.getAttribute("data-opens-dialog") };
    d.replaceChildren(template.content.cloneNode(true));
    if (window.htmx) window.htmx.process(d);
    d.showModal();
    const field = d.querySelector("textarea, select, input:not([type=hidden]), button");
    if (field) field.focus();
  });

  document.addEventListener("DOMContentLoaded", function () {
    const d = document.getElementById("dialog");
    if (!d) return;
    d.addEventListener("close", function () {
      if (!opener) return;
      const again = document.querySelector('[data-opens-dialog="' + CSS.escape(opener.what) + '"]');
      opener = null;
      if (again) again.focus();
    });
  });
})();

/* A poll that waits while the person is busy: an element's data-poll-pauses names a function
   (window[name]) that says whether they are (ticking runs, typing a note); while it answers
   true, the poll's requests are dropped. Other triggers of the same element (an event) still go.
   htmx's trigger filter ("every 10s [!busy()]") would do this by evaluating a string, which the
   pages' Content-Security-Policy forbids (htmx's allowEval is off in base.html). */
(function () {
  "use strict";

  document.addEventListener("htmx:beforeRequest", function (event) {
    const elt = event.detail.elt;
    const name = elt && elt.getAttribute ? elt.getAttribute("data-poll-pauses") : null;
    const config = event.detail.requestConfig;
    if (!name || (config && config.triggeringEvent)) return;
    const busy = window[name];
    if (typeof busy === "function" && busy()) event.preventDefault();
  });
})();

/* An action's answer always shows. The run's panel, the dead letters and the queue's results
   are redrawn by their poll and by the answer to an action taken in them. Were a poll's redraw
   to land while an action was on its way, it would detach the element that sent the action (and
   the region the action aims at): htmx would then swap the answer into the detached copy, or
   fail to find the #dialog a refusal is retargeted to (it looks that up from the sending
   element), and a refusal saying nothing was applied would never be seen. Retargeting the
   answer in htmx:beforeSwap cannot help the second case, which fails before that event. So
   while an action (any request but a GET) aimed at a region, or sent from inside it, is on its
   way, a redraw of that region (a poll; on the queue, a filter's too) is not swapped in: the
   action's answer draws the region as it is after the action, and the next poll carries on. */
(function () {
  "use strict";

  const actions = new Map(); // XMLHttpRequest → { elt, target } of each action sent

  function onItsWay(xhr) {
    return xhr.readyState !== XMLHttpRequest.UNSENT && xhr.readyState !== XMLHttpRequest.DONE;
  }

  document.addEventListener("htmx:beforeSend", function (event) {
    const config = event.detail.requestConfig;
    if (config && config.verb !== "get") actions.set(event.detail.xhr, { elt: config.elt, target: event.detail.target });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    const region = event.detail.target;
    const config = event.detail.requestConfig;
    if (!region || !config || config.verb !== "get") return;
    actions.forEach(function (action, xhr) {
      // One answered, failed or aborted is forgotten here: its own end may not reach the document.
      if (!onItsWay(xhr)) actions.delete(xhr);
      else if (action.target === region || region.contains(action.elt)) event.detail.shouldSwap = false;
    });
  });
})();
