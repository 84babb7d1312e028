package web

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// The approve form's repeat grant (issue 37, item 4): the card offers "and the next N identical
// calls for T minutes"; N = 0 grants nothing; a grant in bounds goes into the signed request
// (behind the same CSRF and Origin checks as any decision); one out of bounds sends nothing.
func TestApproveFormCarriesARepeatGrant(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"cf-g0", "cf-g1", "cf-g2"} {
		e.confirmation(id, "turn/c/1", "pay", `{"amount":5}`, time.Minute)
	}
	b := e.browser()
	b.login("alice", "correct horse")
	if _, page := b.get("/"); !strings.Contains(page, `name="repeat_count"`) || !strings.Contains(page, `name="repeat_minutes"`) {
		t.Fatal("the approve form offers no repeat grant")
	}
	post := func(id, n, minutes string) {
		b.post("/decide", url.Values{"csrf": {b.csrf()}, "confirmation_id": {id}, "decision": {"approve"},
			"args_digest": {"sha256:" + id}, "repeat_count": {n}, "repeat_minutes": {minutes}})
	}
	post("cf-g0", "0", "15")
	post("cf-g1", "3", "10")
	post("cf-g2", "21", "10")
	if len(e.rec.reqs) != 2 {
		t.Fatalf("an out-of-bounds grant was sent: %d decisions", len(e.rec.reqs))
	}
	if r := e.rec.reqs[0]; r.RepeatCount != 0 || r.RepeatMinutes != 0 {
		t.Fatalf("N = 0 granted %+v", r)
	}
	if r := e.rec.reqs[1]; r.RepeatCount != 3 || r.RepeatMinutes != 10 || r.Approver != "alice" {
		t.Fatalf("grant = %+v", r)
	}
}
