// Airlock approver page: live countdowns to each confirmation's expiry (an expired one is
// marked and its buttons disabled; the server refuses it anyway) and a reload of a running
// turn's page until it has something new to show. No inline script anywhere (CSP).
"use strict";

function tick() {
  const now = Date.now();
  document.querySelectorAll("time.countdown").forEach(function (t) {
    const ms = Date.parse(t.getAttribute("datetime")) - now;
    const card = t.closest(".card");
    if (!(ms > 0)) { // past the expiry (or an unreadable time): expired
      t.textContent = "expired";
      if (card && !card.classList.contains("expired")) {
        card.classList.add("expired");
        card.querySelectorAll("button, input[type=text], textarea").forEach(function (b) { b.disabled = true; });
      }
      return;
    }
    const left = Math.ceil(ms / 1000), m = Math.floor(left / 60), s = left % 60;
    t.textContent = (m > 0 ? m + " min " : "") + s + " s left";
  });
}

document.addEventListener("DOMContentLoaded", function () {
  tick();
  setInterval(tick, 1000);
  const page = document.getElementById("turn-page");
  const every = page && Number(page.dataset.refresh);
  if (every > 0) {
    setTimeout(function () { location.reload(); }, every * 1000);
  }
});

// The live inbox (issue 23): /events says "change" whenever the undecided confirmations
// change; the inbox is then fetched again and swapped in, so cards appear, update and go
// without a reload. A card the approver is typing in (focus, or an edited field) is kept as it
// is. The stream carries only a version: every card still comes from the signed-in page.
function liveInbox() {
  if (!document.getElementById("inbox") || !window.EventSource) { return; }
  let busy = false, again = false;
  function dirty(card) {
    if (card.contains(document.activeElement) && document.activeElement !== document.body) { return true; }
    return Array.prototype.some.call(card.querySelectorAll("input[type=text], textarea"), function (f) {
      return f.value !== f.defaultValue;
    });
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("inbox");
        const box = document.getElementById("inbox");
        if (!fresh || !box) { return; } // signed out: the next navigation shows the login page
        box.querySelectorAll("section.card[id]").forEach(function (card) {
          const twin = fresh.querySelector("section.card[id=\"" + CSS.escape(card.id) + "\"]");
          if (twin && dirty(card)) { twin.replaceWith(card); }
        });
        box.replaceWith(document.adoptNode(fresh));
        tick();
      })
      .catch(function () {})
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  const es = new EventSource(document.getElementById("inbox").dataset.live);
  es.addEventListener("change", refresh);
}

document.addEventListener("DOMContentLoaded", liveInbox);
