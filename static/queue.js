// The queue's keyboard and tab title (templates/handover/queue.html). No framework: htmx swaps
// #queue-results every 10 s and after each action; this file keeps the person's place across
// those swaps, counts new escalations in the tab title, and answers the shortcuts listed in the
// help overlay (`?`).
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

  function select(index) {
    var all = rows();
    if (!all.length) return;
    index = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (row) {
      row.classList.remove("current");
      row.removeAttribute("aria-current");
    });
    var row = all[index];
    row.classList.add("current");
    row.setAttribute("aria-current", "true");
    current = row.getAttribute("data-ticket") || String(index);
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

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
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
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var dialog = help();
    if (dialog && dialog.open) return; // the dialog's own keys (Escape closes it)
    var action = keys[event.key];
    if (!action) return;
    event.preventDefault();
    action();
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

  // After every swap of the results (a poll, a filter, an action): the ticks and the keyboard's
  // row again, and the count of escalations that arrived since the page opened in the title.
  document.addEventListener("htmx:afterSettle", function (event) {
    var source = event.detail && event.detail.requestConfig && event.detail.requestConfig.elt;
    // A bulk action's answer is the runs after the action: nothing stays ticked.
    if (!(source && source.id === "bulk-form")) restoreTicked();
    ticked = [];
    restoreCurrent();
    showNewEscalations();
  });

  document.addEventListener("DOMContentLoaded", showNewEscalations);
})();
