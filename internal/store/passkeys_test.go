package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Passkeys (issue 21, item 3) on both drivers: registered once (to one approver), listed live,
// the counter's compare-and-set accepts only a rise (or 0 after 0, or the retry of the nonce
// that set it) and at most one of two concurrent uses of one counter, and a removed passkey
// is neither listed nor usable nor registrable again.
func TestPasskeys(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		p := Passkey{CredentialID: "cred-a", Approver: "alice", PublicKey: []byte{1, 2, 3}, SignCount: 1, AAGUID: "01ab", Name: "laptop", CreatedAt: base}
		if err := s.AddPasskey(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := s.AddPasskey(ctx, Passkey{CredentialID: "cred-a", Approver: "bob", PublicKey: []byte{9}}); !errors.Is(err, ErrPasskeyExists) {
			t.Fatalf("bob registering alice's credential: %v, want ErrPasskeyExists", err)
		}
		got, err := s.GetPasskey(ctx, "cred-a")
		if err != nil || got.Approver != "alice" || string(got.PublicKey) != "\x01\x02\x03" || got.SignCount != 1 || got.AAGUID != "01ab" ||
			got.Name != "laptop" || got.RemovedAt != nil || !got.CreatedAt.Equal(base.Truncate(time.Microsecond)) {
			t.Fatalf("get = %+v, %v", got, err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 1, "n1", base); !errors.Is(err, ErrPasskeyCounter) {
			t.Fatalf("counter 1 after 1: %v, want ErrPasskeyCounter", err)
		}
		if err := s.UsePasskey(ctx, "bob", "cred-a", 5, "n1", base); !errors.Is(err, ErrPasskeyCounter) {
			t.Fatalf("bob using alice's passkey: %v, want ErrPasskeyCounter", err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 5, "n1", base); err != nil {
			t.Fatalf("counter 5 after 1: %v", err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 5, "n1", base); err != nil {
			t.Fatalf("the retry of the presentation with nonce n1: %v", err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 5, "n2", base); !errors.Is(err, ErrPasskeyCounter) {
			t.Fatalf("counter 5 again for another decision: %v, want ErrPasskeyCounter", err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 4, "n3", base); !errors.Is(err, ErrPasskeyCounter) {
			t.Fatalf("counter going back: %v, want ErrPasskeyCounter", err)
		}
		// Two decisions racing with the same counter: exactly one wins.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.UsePasskey(ctx, "alice", "cred-a", 6, fmt.Sprintf("race-%d", i), base)
			}()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("concurrent uses of counter 6: %v, %v (exactly one must win)", errs[0], errs[1])
		}
		if got, _ := s.GetPasskey(ctx, "cred-a"); got.SignCount != 6 || got.LastUsedAt == nil {
			t.Fatalf("after use: %+v", got)
		}
		// A counterless authenticator: 0 after 0 is accepted.
		if err := s.AddPasskey(ctx, Passkey{CredentialID: "cred-z", Approver: "alice", PublicKey: []byte{7}}); err != nil {
			t.Fatal(err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-z", 0, "z1", base); err != nil {
			t.Fatalf("0 after 0: %v", err)
		}
		if l, err := s.ListPasskeys(ctx, "alice"); err != nil || len(l) != 2 {
			t.Fatalf("list = %+v, %v", l, err)
		}
		if h, err := s.PasskeyHolders(ctx); err != nil || len(h) != 1 || h[0] != "alice" {
			t.Fatalf("holders = %v, %v", h, err)
		}
		if err := s.RemovePasskey(ctx, "bob", "cred-a", base); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob removing alice's passkey: %v", err)
		}
		if err := s.RemovePasskey(ctx, "alice", "cred-a", base); err != nil {
			t.Fatal(err)
		}
		if err := s.UsePasskey(ctx, "alice", "cred-a", 100, "n9", base); !errors.Is(err, ErrPasskeyCounter) {
			t.Fatalf("a removed passkey used: %v, want ErrPasskeyCounter", err)
		}
		if got, _ := s.GetPasskey(ctx, "cred-a"); got.RemovedAt == nil {
			t.Fatal("removed_at not set")
		}
		if l, _ := s.ListPasskeys(ctx, "alice"); len(l) != 1 || l[0].CredentialID != "cred-z" {
			t.Fatalf("list after removal = %+v", l)
		}
		if err := s.AddPasskey(ctx, p); !errors.Is(err, ErrPasskeyExists) {
			t.Fatalf("re-registering a removed passkey: %v, want ErrPasskeyExists", err)
		}
		if err := s.AddPasskey(ctx, Passkey{CredentialID: "x", Approver: "alice"}); err == nil {
			t.Fatal("a passkey without a public key was stored")
		}
	})
}

// A registration ceremony is taken once, by its approver, before it expires.
func TestPasskeyChallenges(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		now := time.Now()
		sess := json.RawMessage(`{"challenge":"abc"}`)
		if err := s.SavePasskeyChallenge(ctx, "c1", "alice", sess, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TakePasskeyChallenge(ctx, "c1", "bob", now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob taking alice's ceremony: %v", err)
		}
		got, err := s.TakePasskeyChallenge(ctx, "c1", "alice", now)
		if err != nil || string(got) != `{"challenge":"abc"}` {
			t.Fatalf("take = %s, %v", got, err)
		}
		if _, err := s.TakePasskeyChallenge(ctx, "c1", "alice", now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second take: %v", err)
		}
		if err := s.SavePasskeyChallenge(ctx, "c2", "alice", sess, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TakePasskeyChallenge(ctx, "c2", "alice", now.Add(2*time.Minute)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired take: %v", err)
		}
	})
}
