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

// The live inbox (issue 23): /events sends the inbox's version on connect and on every
// change; when it differs from the page's, the inbox is fetched again and reconciled: cards
// that are decided are removed (one whose time ran out stays, marked expired), new cards are inserted in their turn's group, and a card still
// waiting is never touched (what the approver typed, opened or is about to click stays). The
// stream carries only a version: every card still comes from the signed-in page.
function liveInbox() {
  const start = document.getElementById("inbox");
  if (!start || !window.EventSource) { return; }
  let version = start.dataset.version || "", busy = false, again = false;
  function turnOf(article) {
    const a = article.querySelector("h2 a");
    return a ? a.getAttribute("href") : "";
  }
  function reconcile(fresh) {
    const box = document.getElementById("inbox");
    const want = {};
    fresh.querySelectorAll("section.card[id]").forEach(function (c) { want[c.id] = true; });
    box.querySelectorAll("section.card[id]").forEach(function (c) {
      if (want[c.id]) { return; }
      // A card whose time ran out stays, marked expired (tick), instead of vanishing under the
      // approver's eyes; any other card that left the inbox (decided) goes.
      const t = c.querySelector("time.countdown");
      if (t && !(Date.parse(t.getAttribute("datetime")) > Date.now())) { return; }
      c.remove();
    });
    box.querySelectorAll("article.turn").forEach(function (a) {
      if (!a.querySelector("section.card")) { a.remove(); }
    });
    let prev = null; // the last group placed, in the fresh page's order
    fresh.querySelectorAll("article.turn").forEach(function (fa) {
      let group = null;
      box.querySelectorAll("article.turn").forEach(function (a) { if (!group && turnOf(a) === turnOf(fa)) { group = a; } });
      if (!group) {
        group = document.importNode(fa, true);
        const anchor = prev ? prev.nextElementSibling : box.querySelector("article.turn, #empty, nav.pages:last-child");
        if (anchor) { box.insertBefore(group, anchor); } else { box.appendChild(group); }
      } else {
        let last = null;
        fa.querySelectorAll("section.card[id]").forEach(function (fc) {
          let have = document.getElementById(fc.id);
          if (!have) {
            have = document.importNode(fc, true);
            const next = last ? last.nextElementSibling : group.querySelector("section.card, details.earlier");
            group.insertBefore(have, next);
          }
          last = have;
        });
      }
      prev = group;
    });
    [["count"], ["empty"]].forEach(function (ids) {
      const id = ids[0], now = document.getElementById(id), next = fresh.querySelector("#" + id);
      if (now && next) { now.textContent = next.textContent; }
      else if (now && !next) { now.remove(); }
      else if (!now && next) { box.appendChild(document.importNode(next, true)); }
    });
    tick();
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("inbox");
        if (fresh) { reconcile(fresh); }
      })
      .catch(function () {})
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  const es = new EventSource(start.dataset.live);
  es.addEventListener("change", function (e) {
    if (e.data !== version) { version = e.data; refresh(); }
  });
}

document.addEventListener("DOMContentLoaded", liveInbox);
