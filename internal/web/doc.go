// Package web is the approver page (`airlock web`): a server-rendered inbox of pending
// confirmations across turns, one page per turn, a history of past decisions, and the forms
// that approve, deny (with a reason the model receives) or edit a proposal.
//
// Every page and action needs a signed-in approver (approvers file, bcrypt passwords): sessions
// live in server memory behind a random 256-bit id sent in a Secure, HttpOnly, SameSite=Strict
// cookie; every POST carries the session's CSRF token and a same-origin Origin; failed sign-ins
// are rate limited per approver name and per client address. The signed-in approver is the one
// recorded in the decision, never a form field, and the decision is attested with the page's
// own surface credential. The form carries the digest of the arguments it displayed, so a stale
// page never approves changed arguments (the turn refuses it stale_digest).
//
// Everything a model, a recording or a client wrote (tool names, arguments, reasons, ids) is
// escaped by html/template and shown with bidirectional, invisible and control characters made
// visible as <U+XXXX>, with a badge naming the flag; long values are truncated behind a "show
// all" disclosure. Templates, the stylesheet and the one script are embedded (embed.FS); the
// Content-Security-Policy allows no inline script.
package web
