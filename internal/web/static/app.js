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

// Passkeys (issue 21, item 3). Registration: /passkeys/begin returns the creation options and
// a ceremony id; navigator.credentials.create makes the passkey; the form posts it to
// /passkeys/finish, which verifies and stores it. A decision on a card marked data-passkey:
// /decide/challenge signs the decision and returns its MAC as the challenge; the approver's
// authenticator signs it (navigator.credentials.get); the form posts the decision with the
// nonce and the assertion to /decide, and the worker verifies the assertion.
function b64u(buf) {
  const b = new Uint8Array(buf);
  let s = "";
  for (let i = 0; i < b.length; i++) { s += String.fromCharCode(b[i]); }
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function unb64u(s) {
  const t = atob(String(s).replace(/-/g, "+").replace(/_/g, "/"));
  const b = new Uint8Array(t.length);
  for (let i = 0; i < t.length; i++) { b[i] = t.charCodeAt(i); }
  return b.buffer;
}

function credentialJSON(c) {
  const r = c.response, out = { id: c.id, rawId: b64u(c.rawId), type: c.type, clientExtensionResults: {}, response: { clientDataJSON: b64u(r.clientDataJSON) } };
  if (c.authenticatorAttachment) { out.authenticatorAttachment = c.authenticatorAttachment; }
  if (r.attestationObject) {
    out.response.attestationObject = b64u(r.attestationObject);
    if (r.getTransports) { out.response.transports = r.getTransports(); }
  }
  if (r.authenticatorData) {
    out.response.authenticatorData = b64u(r.authenticatorData);
    out.response.signature = b64u(r.signature);
    if (r.userHandle) { out.response.userHandle = b64u(r.userHandle); }
  }
  return JSON.stringify(out);
}

function passkeyStatus(near, text) {
  const scope = near.closest(".card") || document;
  const el = scope.querySelector(".passkey-status");
  if (el) { el.textContent = text; }
}

function postForm(url, form) {
  return fetch(url, { method: "POST", credentials: "same-origin", body: new URLSearchParams(new FormData(form)) })
    .then(function (r) {
      return r.json().catch(function () { return { error: "the page answered " + r.status }; })
        .then(function (j) { return r.ok ? j : Promise.reject(new Error(j.error || ("the page answered " + r.status))); });
    });
}

function registerPasskey(form) {
  if (!window.PublicKeyCredential) { passkeyStatus(form, "This browser has no passkey support (WebAuthn)."); return; }
  passkeyStatus(form, "Waiting for your authenticator…");
  postForm("/passkeys/begin", form).then(function (opts) {
    const pk = opts.publicKey;
    pk.challenge = unb64u(pk.challenge);
    pk.user.id = unb64u(pk.user.id);
    (pk.excludeCredentials || []).forEach(function (c) { c.id = unb64u(c.id); });
    return navigator.credentials.create({ publicKey: pk }).then(function (cred) {
      form.querySelector("input[name=ceremony]").value = opts.ceremony;
      form.querySelector("input[name=credential]").value = credentialJSON(cred);
      form.querySelector("input[name=password]").value = ""; // checked by /passkeys/begin; not sent again
      form.submit();
    });
  }).catch(function (e) { passkeyStatus(form, "No passkey registered: " + e.message); });
}

function passkeyDecide(form) {
  if (!window.PublicKeyCredential) { passkeyStatus(form, "This browser has no passkey support (WebAuthn): this call cannot be decided here."); return; }
  passkeyStatus(form, "Waiting for your passkey…");
  postForm("/decide/challenge", form).then(function (ch) {
    const pk = ch.publicKey;
    pk.challenge = unb64u(pk.challenge);
    (pk.allowCredentials || []).forEach(function (c) { c.id = unb64u(c.id); });
    return navigator.credentials.get({ publicKey: pk }).then(function (cred) {
      form.querySelector("input[name=nonce]").value = ch.nonce;
      form.querySelector("input[name=passkey]").value = credentialJSON(cred);
      form.submit();
    });
  }).catch(function (e) { passkeyStatus(form, "Not sent: " + e.message); });
}

document.addEventListener("submit", function (e) {
  const form = e.target;
  if (form.matches("form.register-passkey")) { e.preventDefault(); registerPasskey(form); return; }
  if (form.matches("form[data-passkey]") && !form.querySelector("input[name=passkey]").value) { e.preventDefault(); passkeyDecide(form); }
}, true);
