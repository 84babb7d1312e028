package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every change to the undecided confirmations wakes a PostgreSQL listener through NOTIFY, in
// the statement that makes it (a new confirmation, a decision with its proof, a reissued
// token, an edit), well before the listener's 2 s fallback poll; a write that changes nothing
// (a refused second decision) changes nothing stored.
func TestConfirmationChangesNotifyListeners(t *testing.T) {
	t.Parallel()
	u := freshURL(t, DriverPostgres)
	s := openStore(t, u)
	ctx := testCtx(t)
	wake := s.WatchConfirmations(ctx)
	// Wait until the listener is connected: a confirmation created before its LISTEN would
	// wake it only at the fallback poll. Warm-up rows are created until one wakes it.
	for i := 0; ; i++ {
		if _, err := s.CreateConfirmation(ctx, newConfirmation(fmt.Sprint("warm-", i), byte(0x90+i))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		case <-time.After(250 * time.Millisecond):
			if i == 40 {
				t.Fatal("the listener never woke for a new confirmation")
			}
			continue
		}
		break
	}
	// The channel is database-wide: tests of other packages on the same database may wake
	// the listener too, so a drain is bounded (and a wake may come from them: this test
	// shows that each change notifies, not that nothing else does).
	drain := func() {
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			select {
			case <-wake:
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	}
	woken := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(1500 * time.Millisecond):
			t.Fatalf("%s: no notification within 1.5 s", what)
		}
	}
	drain()
	c := newConfirmation("c-n", 7)
	if _, err := s.CreateConfirmation(ctx, c); err != nil {
		t.Fatal(err)
	}
	woken("create")
	drain()
	if _, err := s.PresentToken(ctx, "c-n", "p1", base); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ReissueToken(ctx, "c-n", "p1", 1, bytes.Repeat([]byte{8}, 32), []byte("sealed-2")); err != nil || !ok {
		t.Fatalf("reissue = %v, %v", ok, err)
	}
	woken("reissue")
	drain()
	if err := s.DecideProved(ctx, "c-n", DecisionApproved, "alice", "", "CLI credential", base); err != nil {
		t.Fatal(err)
	}
	woken("decide")
	row, err := s.GetConfirmation(ctx, "c-n")
	if err != nil || row.Decision != DecisionApproved || row.ApproverProof != "CLI credential" {
		t.Fatalf("row = %+v, %v; want approved with its proof", row, err)
	}
	if err := s.DecideProved(ctx, "c-n", DecisionDenied, "bob", "no", "other", base); !errors.Is(err, ErrConflict) {
		t.Fatalf("second decision err = %v, want ErrConflict", err)
	}
	if row, _ := s.GetConfirmation(ctx, "c-n"); row.Approver != "alice" || row.ApproverProof != "CLI credential" {
		t.Fatalf("a refused decision changed the row: %+v", row)
	}
	drain()
	e := newConfirmation("c-e", 9)
	if _, err := s.CreateConfirmation(ctx, e); err != nil {
		t.Fatal(err)
	}
	drain()
	if err := s.EditConfirmation(ctx, "c-e", "alice", "sha256:ed", base); err != nil {
		t.Fatal(err)
	}
	woken("edit")
}

// A retried decision finds it recorded and adds its proof only when none is recorded (an
// earlier attempt that recorded the decision without one, through DecideConfirmation).
func TestDecideProvedRetry(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("c-r", 3)); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideConfirmation(ctx, "c-r", DecisionApproved, "alice", "", base); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideProved(ctx, "c-r", DecisionApproved, "alice", "", "passkey", base); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if err := s.DecideProved(ctx, "c-r", DecisionApproved, "alice", "", "later", base); err != nil {
			t.Fatalf("second retry: %v", err)
		}
		if row, _ := s.GetConfirmation(ctx, "c-r"); row.ApproverProof != "passkey" {
			t.Fatalf("proof = %q, want the first one recorded", row.ApproverProof)
		}
		if err := s.DecideProved(ctx, "c-r", "maybe", "alice", "", "x", base); err == nil {
			t.Fatal("an invalid decision must be refused")
		}
	})
}

// The first principal to bind a conversation owns it: later binds, and binds racing the first
// one, all return that owner and never an error.
func TestBindConversationFirstOwnerWins(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if owner, err := s.BindConversation(ctx, "conv", "alice", "turn/conv/1", base); err != nil || owner != "alice" {
			t.Fatalf("first bind = %q, %v; want alice", owner, err)
		}
		if owner, err := s.BindConversation(ctx, "conv", "mallory", "turn/conv/2", base); err != nil || owner != "alice" {
			t.Fatalf("second bind = %q, %v; want alice", owner, err)
		}
		for round := range 5 {
			conv := fmt.Sprintf("race-%d", round)
			owners := make(chan string, 8)
			errs := make(chan error, 8)
			for i := range 8 {
				go func() {
					o, err := s.BindConversation(ctx, conv, fmt.Sprintf("p%d", i), "turn/"+conv+"/1", base)
					owners <- o
					errs <- err
				}()
			}
			first := ""
			for range 8 {
				if err := <-errs; err != nil {
					t.Fatalf("racing bind: %v", err)
				}
				o := <-owners
				if first == "" {
					first = o
				}
				if o != first || o == "" {
					t.Fatalf("racing binds returned owners %q and %q", first, o)
				}
			}
		}
	})
}

// WatchConfirmationIDs names each changed confirmation (created, reissued, decided) from the
// notification its change sends on PostgreSQL; a receiver that falls more than maxQueuedIDs
// behind gets one "" (re-read everything) in place of the ids it missed, never a blocked
// notifier; on SQLite every send is "".
func TestWatchConfirmationIDs(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, freshURL(t, DriverPostgres))
		ctx := testCtx(t)
		ids := s.WatchConfirmationIDs(ctx)
		// named reports whether want is named within d, skipping "" (fallback re-reads) and
		// other ids (the channel is database-wide: other tests' confirmations).
		named := func(want string, d time.Duration) bool {
			for end := time.After(d); ; {
				select {
				case id := <-ids:
					if id == want {
						return true
					}
				case <-end:
					return false
				}
			}
		}
		next := func(what, want string) {
			t.Helper()
			if !named(want, 1500*time.Millisecond) {
				t.Fatalf("%s: %q was not named within 1.5 s", what, want)
			}
		}
		// The listener connects in the background: warm up until a creation is named.
		for i := 0; ; i++ {
			id := fmt.Sprint("idw-", i)
			if _, err := s.CreateConfirmation(ctx, newConfirmation(id, byte(0x40+i))); err != nil {
				t.Fatal(err)
			}
			if named(id, 250*time.Millisecond) {
				break
			}
			if i == 40 {
				t.Fatal("the listener never named a new confirmation")
			}
		}
		if _, err := s.CreateConfirmation(ctx, newConfirmation("id-c", 0x71)); err != nil {
			t.Fatal(err)
		}
		next("create", "id-c")
		if err := s.DecideProved(ctx, "id-c", DecisionApproved, "alice", "", "CLI credential", base); err != nil {
			t.Fatal(err)
		}
		next("decide", "id-c")

		// A receiver that does not read while more than maxQueuedIDs confirmations change.
		const n = maxQueuedIDs + 40
		for i := range n {
			c := newConfirmation(fmt.Sprint("flood-", i), 0)
			c.TokenHash = bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 11)[:32]
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond) // every notification delivered to the watcher
		select {
		case id := <-ids:
			if id != "" {
				t.Fatalf("after %d unread changes the first value is %q, want \"\" (re-read)", n, id)
			}
		case <-time.After(time.Second):
			t.Fatal("nothing sent after the flood")
		}
		// The dropped ids are not sent after the re-read.
		select {
		case id := <-ids:
			if strings.HasPrefix(id, "flood-") {
				t.Fatalf("dropped id %q sent after the re-read", id)
			}
		case <-time.After(300 * time.Millisecond):
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, freshURL(t, DriverSQLite))
		ctx := testCtx(t)
		ids := s.WatchConfirmationIDs(ctx)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("id-s", 0x72)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case id := <-ids:
				if id != "" {
					t.Fatalf("SQLite sent %q, want \"\" (it has no notifications)", id)
				}
			case <-time.After(time.Second):
				t.Fatal("SQLite: no re-read within 1 s (poll every 200 ms)")
			}
		}
	})
}
