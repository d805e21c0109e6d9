// The queue's keyboard and tab title (templates/handover/queue.html). No framework: htmx swaps
// #queue-results every 10 s and after each action; this file keeps the person's row and ticks
// across those swaps (static/seam.js keeps focus), counts new escalations in the tab title, and
// answers the shortcuts listed in the help overlay (`?`) when no link, button or field has focus.
(function () {
  "use strict";

  var baseTitle = document.title;
  var current = null; // the data-ticket (or index) of the row the keyboard is on

  function results() {
    return document.getElementById("queue-results");
  }

  function rows() {
    var box = results();
    return box ? Array.prototype.slice.call(box.querySelectorAll("tbody tr")) : [];
  }

  // Polling pauses while runs are ticked or the bulk form is being filled in, so a refresh
  // never drops a selection the person is building.
  window.seamQueueBusy = function () {
    var box = results();
    if (box && box.querySelector('input[name="run"]:checked')) return true;
    var bulk = document.getElementById("bulk-form");
    return Boolean(bulk && bulk.contains(document.activeElement) && document.activeElement.tagName !== "BUTTON");
  };

  function showNewEscalations() {
    var box = results();
    var n = box ? parseInt(box.getAttribute("data-new-escalations") || "0", 10) : 0;
    document.title = n > 0 ? "(" + n + ") " + baseTitle : baseTitle;
  }

  function mark(row) {
    rows().forEach(function (other) {
      other.classList.remove("current");
      other.removeAttribute("aria-current");
    });
    row.classList.add("current");
    row.setAttribute("aria-current", "true");
    current = row.getAttribute("data-ticket");
  }

  // The keyboard's row takes focus (rows have tabindex="-1"), so that Tab goes on from it to its
  // own links and buttons, and a screen reader reads the row.
  function select(index) {
    var all = rows();
    if (!all.length) return;
    var row = all[Math.max(0, Math.min(all.length - 1, index))];
    mark(row);
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
  }

  function currentIndex() {
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (all[i].classList.contains("current")) return i;
    }
    return -1;
  }

  function restoreCurrent() {
    if (current === null) return;
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-ticket") === current) {
        all[i].classList.add("current");
        all[i].setAttribute("aria-current", "true");
        return;
      }
    }
  }

  function help() {
    return document.getElementById("shortcuts-help");
  }

  // What acts on a key of its own: a link or button follows Enter, a box Space, a field every key.
  // A tabindex of -1 (a row, a heading given focus after an action) makes nothing interactive.
  var INTERACTIVE = [
    "a[href]", "area[href]", "button", "input", "select", "textarea", "summary", "iframe",
    "audio[controls]", "video[controls]", '[contenteditable]:not([contenteditable="false"])',
    '[tabindex]:not([tabindex^="-"])', "[role=button]", "[role=link]", "[role=checkbox]",
    "[role=radio]", "[role=switch]", "[role=tab]", "[role=menuitem]", "[role=option]",
    "[role=textbox]", "[role=searchbox]", "[role=combobox]", "[role=slider]", "[role=spinbutton]",
  ].join(", ");

  // The shortcuts take a key only when nothing focused wants it: focus on the page itself (or a
  // plain element such as a heading), or on a run's row. Never from a control, so Enter on
  // "Dead letters", a ticket or "Assign to me" does what that control says.
  function shortcutsMayTake(target) {
    if (!(target instanceof Element) || target === document.body) return true;
    if (target.isContentEditable) return false;
    return !target.closest(INTERACTIVE);
  }

  var keys = {
    j: function () {
      select(currentIndex() + 1);
    },
    k: function () {
      var i = currentIndex();
      select(i < 0 ? 0 : i - 1);
    },
    o: function () {
      var i = currentIndex();
      var link = i >= 0 ? rows()[i].querySelector("td a[href]:not(.helpdesk)") : null;
      if (link) window.location.assign(link.href);
    },
    x: function () {
      var i = currentIndex();
      var box = i >= 0 ? rows()[i].querySelector('input[name="run"]') : null;
      if (box) box.checked = !box.checked;
    },
    "/": function () {
      var search = document.getElementById("q");
      if (search) {
        search.focus();
        search.select();
      }
    },
    m: function () {
      var mine = document.getElementById("view-mine");
      if (mine) window.location.assign(mine.href);
    },
    "?": function () {
      var dialog = help();
      if (dialog && !dialog.open) dialog.showModal();
    },
  };
  keys.Enter = keys.o;

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || !shortcutsMayTake(event.target)) return;
    var dialog = help();
    if (dialog && dialog.open) return; // the dialog's own keys (Escape closes it)
    var action = keys[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });

  // A row focused another way (a click on it, focus given back after a redraw) is the keyboard's.
  document.addEventListener("focusin", function (event) {
    var box = results();
    var target = event.target;
    if (box && target instanceof Element && target.matches("tbody tr[data-ticket]") && box.contains(target)) {
      mark(target);
    }
  });

  // Runs ticked for a bulk action stay ticked when the results are drawn again (a filter, a
  // refresh), as long as the run is as it was: its value carries the state its row showed.
  var ticked = [];
  document.addEventListener("htmx:beforeSwap", function () {
    var box = results();
    ticked = box
      ? Array.prototype.map.call(box.querySelectorAll('input[name="run"]:checked'), function (input) {
          return input.value;
        })
      : [];
  });

  function restoreTicked() {
    var box = results();
    if (!box || !ticked.length) return;
    Array.prototype.forEach.call(box.querySelectorAll('input[name="run"]'), function (input) {
      if (ticked.indexOf(input.value) >= 0) input.checked = true;
    });
  }

  // The ticks go back as soon as the new results are in, before settling: a bulk action that
  // waited in the queue's request queue (templates/handover/queue.html, hx-sync) is sent right
  // after this swap and takes the ticked runs with it.
  document.addEventListener("htmx:afterSwap", function (event) {
    var source = event.detail && event.detail.requestConfig && event.detail.requestConfig.elt;
    // A bulk action's answer is the runs after the action: nothing stays ticked.
    if (!(source && source.id === "bulk-form")) restoreTicked();
    ticked = [];
  });

  // After every swap of the results (a poll, a filter, an action): the keyboard's row again, and
  // the count of escalations that arrived since the page opened in the title.
  document.addEventListener("htmx:afterSettle", function () {
    restoreCurrent();
    showNewEscalations();
  });

  document.addEventListener("DOMContentLoaded", showNewEscalations);
})();
