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
