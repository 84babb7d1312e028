package clients

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func refusal(t *testing.T, err error) string {
	t.Helper()
	var r *RefusedError
	if err == nil {
		return ""
	}
	if !errors.As(err, &r) || !errors.Is(err, ErrRefused) {
		t.Fatalf("error %v is not a *RefusedError", err)
	}
	return r.Code
}

// Every way a turn request can fail to prove its requester is refused with its own code; a
// good one returns the registration.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	bob, _ := NewCredential("bob")
	chat, _ := NewCredential("chat")
	for _, c := range []Client{{Name: "bob", PublicKey: bob.Public(), Principals: []string{"bob"}},
		{Name: "chat", PublicKey: chat.Public(), Principals: []string{"user:*"}}} {
		if err := Add(path, c); err != nil {
			t.Fatal(err)
		}
	}
	set, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req := Request{Conversation: "c1", Seq: 3, Principal: "user:carol", Message: "pay the bill", SystemPrompt: "be careful"}
	good := chat.Attest(req, start.Add(-time.Second))
	if c, err := set.Verify("turn/c1/3", req, good, start); err != nil || c.Name != "chat" {
		t.Fatalf("good request: %+v, %v", c, err)
	}
	stranger, _ := NewCredential("chat") // same name, another key
	cases := []struct {
		name  string
		wf    string
		req   Request
		att   *Attestation
		start time.Time
		want  string
	}{
		{"no attestation", "turn/c1/3", req, nil, start, RefusalUnattested},
		{"empty principal", "turn/c1/3", Request{Conversation: "c1", Message: "x"}, chat.Attest(Request{Conversation: "c1", Seq: 3, Message: "x"}, start), start, RefusalNoPrincipal},
		{"control characters in the principal", "turn/c1/3", Request{Conversation: "c1", Principal: "bob\x1b[2J"}, good, start, RefusalNoPrincipal},
		{"other message", "turn/c1/3", Request{Conversation: "c1", Principal: "user:carol", Message: "pay the attacker", SystemPrompt: "be careful"}, good, start, RefusalMisattested},
		{"other system prompt", "turn/c1/3", Request{Conversation: "c1", Principal: "user:carol", Message: "pay the bill"}, good, start, RefusalMisattested},
		{"other principal", "turn/c1/3", Request{Conversation: "c1", Principal: "user:dave", Message: "pay the bill", SystemPrompt: "be careful"}, good, start, RefusalMisattested},
		{"other conversation", "turn/c2/3", Request{Conversation: "c2", Principal: "user:carol", Message: "pay the bill", SystemPrompt: "be careful"}, good, start, RefusalMisattested},
		{"other turn of the conversation", "turn/c1/4", req, good, start, RefusalMisattested},
		{"unknown key under a known name", "turn/c1/3", req, stranger.Attest(req, start), start, RefusalMisattested},
		{"unregistered client", "turn/c1/3", req, func() *Attestation { a := *good; a.Client = "nobody"; return &a }(), start, RefusalMisattested},
		{"time moved", "turn/c1/3", req, func() *Attestation { a := *good; a.Time = a.Time.Add(time.Second); return &a }(), start, RefusalMisattested},
		{"too old", "turn/c1/3", req, chat.Attest(req, start.Add(-MaxAge-time.Second)), start, RefusalExpired},
		{"from the future", "turn/c1/3", req, chat.Attest(req, start.Add(MaxSkew+time.Second)), start, RefusalExpired},
		{"out of scope", "turn/c1/3", Request{Conversation: "c1", Seq: 3, Principal: "carol", Message: "m"},
			bob.Attest(Request{Conversation: "c1", Seq: 3, Principal: "carol", Message: "m"}, start), start, RefusalOutOfScope},
		{"bare prefix", "turn/c1/3", Request{Conversation: "c1", Seq: 3, Principal: "user:", Message: "m"},
			chat.Attest(Request{Conversation: "c1", Seq: 3, Principal: "user:", Message: "m"}, start), start, RefusalOutOfScope},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := set.Verify(tc.wf, tc.req, tc.att, tc.start)
			if got := refusal(t, err); got != tc.want {
				t.Fatalf("refusal = %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	// Scopes compare as written: bob's credential cannot start turns as "BOB".
	if _, err := set.Verify("turn/c1/1", Request{Conversation: "c1", Principal: "BOB"}, bob.Attest(Request{Conversation: "c1", Seq: 1, Principal: "BOB"}, start), start); refusal(t, err) != RefusalOutOfScope {
		t.Fatalf("BOB for bob: %v", err)
	}
}

// The file refuses what would let a credential speak for anyone, and a file others may write.
func TestParseAndModes(t *testing.T) {
	k, _ := NewCredential("x")
	for _, bad := range []string{
		`{"clients":[{"name":"x","public_key":"` + k.Public() + `","principals":["*"]}]}`,
		`{"clients":[{"name":"x","public_key":"` + k.Public() + `","principals":[]}]}`,
		`{"clients":[{"name":"x","public_key":"AAAA","principals":["x"]}]}`,
		`{"clients":[{"name":"x y","public_key":"` + k.Public() + `","principals":["x"]}]}`,
		`{"clients":[{"name":"x","public_key":"` + k.Public() + `","principals":["x"]},{"name":"x","public_key":"` + k.Public() + `","principals":["x"]}]}`,
		`{"clients":[],"extra":1}`,
		// A repeated member: a reader sees principal x, the decoder keeps "user:*".
		`{"clients":[{"name":"x","public_key":"` + k.Public() + `","principals":["x"],"principals":["user:*"]}]}`,
		`{"clients":[]} trailing`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse accepted %s", bad)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "clients.json")
	if err := Add(path, Client{Name: "x", PublicKey: k.Public(), Principals: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrFileMode) {
		t.Fatalf("world-writable file: %v", err)
	}
	cp := filepath.Join(dir, "cred.json")
	if err := SaveCredential(cp, k); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadCredential(cp); err != nil || got.Public() != k.Public() || got.Name != "x" {
		t.Fatalf("credential round trip: %+v, %v", got, err)
	}
	if err := os.Chmod(cp, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredential(cp); !errors.Is(err, ErrCredentialMode) {
		t.Fatalf("readable credential: %v", err)
	}
}

// A Source sees a client added or removed at once; a missing file fails closed.
func TestSourceReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.json")
	src := NewSource(path)
	if _, err := src.Current(); !errors.Is(err, ErrNoFile) {
		t.Fatalf("no file: %v", err)
	}
	a, _ := NewCredential("a")
	if err := Add(path, Client{Name: "a", PublicKey: a.Public(), Principals: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	set, err := src.Current()
	if err != nil || len(set.Names()) != 1 {
		t.Fatalf("after add: %v, %v", set, err)
	}
	if err := Remove(path, "a"); err != nil {
		t.Fatal(err)
	}
	if set, err := src.Current(); err != nil || len(set.Names()) != 0 {
		t.Fatalf("after remove: %v, %v", set, err)
	}
	if err := Remove(path, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

func TestSamePerson(t *testing.T) {
	for _, tc := range []struct {
		a, p string
		same bool
	}{{"alice", "alice", true}, {"alice", "Alice", true}, {"bob", "user:bob", true}, {"bob", "user:BOB", true},
		{"bob", "carol", false}, {"bob", "", false}, {"", "bob", false}, {"bob", "user:bobby", false}} {
		if got := SamePerson(tc.a, tc.p); got != tc.same {
			t.Errorf("SamePerson(%q, %q) = %v", tc.a, tc.p, got)
		}
	}
}

// BenchmarkVerify is the requester check every turn's first round pays (without the store
// write that records it).
func BenchmarkVerify(b *testing.B) {
	set, cred, err := Ephemeral("chat", "user:*")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	req := Request{Conversation: "c1", Seq: 1, Principal: "user:carol", Message: "pay the bill", SystemPrompt: "be careful"}
	att := cred.Attest(req, start)
	for b.Loop() {
		if _, err := set.Verify("turn/c1/1", req, att, start); err != nil {
			b.Fatal(err)
		}
	}
}
