package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	airlockclient "github.com/airlock-dev/airlock/client"
)

// TestClientAPIMode (issue 32, item 4): the Go client package in API mode holds only API keys:
// a requester starts a turn (idempotently), follows it to its interrupt, an approver lists and
// decides the call, the requester reads the result; the requester's own approver key is
// refused (four-eyes).
func TestClientAPIMode(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	a := newAPIStack(t, model)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dialAs := func(caller string) *airlockclient.Client {
		c, err := airlockclient.Dial(ctx, airlockclient.Options{APIURL: a.url, APIKey: apiKeys[caller]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	app, ops, both := dialAs("app-alice"), dialAs("ops-bob"), dialAs("alice-both")
	conv := fmt.Sprintf("goapi-%d", time.Now().UnixNano()%1000000)
	req := airlockclient.TurnRequest{Conversation: conv, Message: "fetch the page"}
	turn, err := app.StartTurnOnce(ctx, req, "once-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := app.StartTurnOnce(ctx, req, "once-1")
	if err != nil || again.ID != turn.ID {
		t.Fatalf("repeat: %v %v", again, err)
	}
	sctx, scancel := context.WithCancel(ctx)
	var types []string
	err = turn.Stream(sctx, 0, airlockclient.StreamOptions{}, func(ev airlockclient.StreamEvent) error {
		types = append(types, ev.Type)
		if ev.Type == airlockclient.EventCustom && strings.Contains(string(ev.Data), `"airlock.interrupt"`) {
			scancel()
		}
		return nil
	})
	scancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stream: %v (%v)", err, types)
	}
	list, err := ops.ListPending(ctx, airlockclient.ListFilter{Conversation: conv})
	if err != nil || len(list) != 1 || list[0].WorkflowID != turn.ID {
		t.Fatalf("ops.ListPending: %v %+v", err, list)
	}
	p := list[0]
	var de *airlockclient.DecisionError
	if err := both.Decide(ctx, airlockclient.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: airlockclient.Approve, ArgsDigest: p.ArgsDigest}); !errors.As(err, &de) || de.Code != "approver_is_requester" || !errors.Is(err, airlockclient.ErrRefused) {
		t.Fatalf("own approval: %v", err)
	}
	if err := ops.Decide(ctx, airlockclient.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: airlockclient.Approve, ArgsDigest: "stale"}); !errors.Is(err, airlockclient.ErrStaleDigest) {
		t.Fatalf("stale digest: %v", err)
	}
	if err := ops.Decide(ctx, airlockclient.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: airlockclient.Approve, ArgsDigest: p.ArgsDigest}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if err := ops.Decide(ctx, airlockclient.DecideRequest{ConfirmationID: p.ConfirmationID, Decision: airlockclient.Approve, ArgsDigest: p.ArgsDigest}); !errors.Is(err, airlockclient.ErrNotPending) {
		t.Fatalf("second decision: %v", err)
	}
	res, err := turn.Result(ctx)
	if err != nil || res.Prose != "all done" || outcomeList(res) != "web_fetch:executed" {
		t.Fatalf("result: %v %+v", err, res)
	}
	if app.Temporal() != nil {
		t.Error("an API-mode client holds a Temporal client")
	}
}
