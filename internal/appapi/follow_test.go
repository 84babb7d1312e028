package appapi

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
)

// A follower never announces, as waiting, a confirmation the store already holds a decision
// for: right after an AG-UI resume decides it, the turn has not yet written its airlock.decided
// event, and an interrupt naming it would end the resumed run on the question just answered.
// A confirmation still undecided is announced.
func TestFollowDoesNotAnnounceADecidedConfirmation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	at := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	const turn = "turn/agui-1/1"
	pending := func(id string, seq int) {
		t.Helper()
		v, _ := json.Marshal(stream.Pending{ConfirmationID: id, Seq: seq, Capability: "web.fetch", Version: 1, ArgsDigest: "sha256:" + id, ExpiresAt: at.Add(time.Hour)})
		ev, _ := json.Marshal(stream.Event{Type: stream.Custom, Name: stream.ConfirmationPending, Value: v})
		if _, err := st.AppendStreamEvent(ctx, turn, "pending-"+id, stream.Custom, ev, at); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateConfirmation(ctx, store.Confirmation{ID: id, TokenHash: []byte("hash-" + id + "-0123456789abcdefghijkl"), SealedToken: []byte("sealed"),
			WorkflowID: turn, RunID: "run-1", Seq: seq, CapabilityID: "web.fetch", Version: 1, ArgsDigest: "sha256:" + id,
			Arguments: json.RawMessage(`{"url":"https://example.com/"}`), Display: "web_fetch https://example.com/", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	pending("cf-answered", 1)
	if err := st.DecideConfirmation(ctx, "cf-answered", store.DecisionApproved, "bob", "", at); err != nil {
		t.Fatal(err)
	}
	s := &Server{opt: Options{Store: st, StreamIdle: 600 * time.Millisecond}, hub: newHub(ctx, st)}
	follow := func() ([][]stream.Pending, error) {
		var announced [][]stream.Pending
		err := s.follow(ctx, turn, 0, true, func(store.StreamEvent) error { return nil }, func(p []stream.Pending) error {
			announced = append(announced, p)
			return nil
		})
		return announced, err
	}
	announced, err := follow()
	if !errors.Is(err, errIdle) || len(announced) != 0 {
		t.Fatalf("only a decided confirmation pending on the stream: want no interrupt and the idle end, got %v, %v", announced, err)
	}
	pending("cf-open", 2)
	announced, err = follow()
	if err != nil || len(announced) != 1 || len(announced[0]) != 1 || announced[0][0].ConfirmationID != "cf-open" {
		t.Fatalf("an undecided confirmation must be announced alone: %v, %v", announced, err)
	}
}
