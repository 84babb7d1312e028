package receipts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
)

// mth is RFC 6962 section 2.1's Merkle Tree Hash, written from the text: the reference the
// compact-range head must agree with.
func mth(leaves [][]byte) []byte {
	switch n := len(leaves); n {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		s := sha256.Sum256(append([]byte{0}, leaves[0]...))
		return s[:]
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		s := sha256.Sum256(append(append([]byte{1}, mth(leaves[:k])...), mth(leaves[k:])...))
		return s[:]
	}
}

func TestHeadAppendIsRFC6962(t *testing.T) {
	var leaves, hashes [][]byte
	h := Head{}
	for i := 0; i < 70; i++ {
		leaf := []byte(fmt.Sprintf(`{"n":%d}`, i))
		leaves, hashes = append(leaves, leaf), append(hashes, LeafHash(leaf))
		next, ap, err := h.Append(LeafHash(leaf))
		if err != nil {
			t.Fatal(err)
		}
		if want := mth(leaves); !bytes.Equal(ap.Root, want) {
			t.Fatalf("size %d: root %x, RFC 6962 says %x", i+1, ap.Root, want)
		}
		if err := proof.VerifyInclusion(hasher, uint64(i), uint64(i+1), LeafHash(leaf), ap.Proof, ap.Root); err != nil {
			t.Fatalf("leaf %d: its proof does not verify: %v", i, err)
		}
		if root, _ := next.Root(); !bytes.Equal(root, ap.Root) {
			t.Fatalf("size %d: the head's root differs from the append's", i+1)
		}
		h = next
	}
	// Consistency proofs between every pair of sizes verify, and fail for another tree.
	for a := uint64(1); a <= 70; a += 7 {
		for b := a; b <= 70; b += 5 {
			p, err := ConsistencyProof(hashes, a, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(hasher, a, b, p, mth(leaves[:a]), mth(leaves[:b])); err != nil {
				t.Fatalf("consistency %d→%d: %v", a, b, err)
			}
			if a < b {
				other := append([][]byte{[]byte("x")}, leaves[1:b]...)
				if proof.VerifyConsistency(hasher, a, b, p, mth(leaves[:a]), mth(other)) == nil {
					t.Fatalf("consistency %d→%d verified against another tree", a, b)
				}
			}
		}
	}
}

func newKey(t testing.TB, origin string) (*Signer, string) {
	t.Helper()
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s, vkey
}

// The checkpoint is C2SP tlog-checkpoint: origin, decimal size, base64 root, then the
// signed-note signature line naming the key and carrying its 4-byte key id.
func TestCheckpointIsASignedTlogCheckpoint(t *testing.T) {
	s, vkey := newKey(t, "example.com/log")
	root := bytes.Repeat([]byte{0xab}, HashSize)
	note, err := s.Sign(42, root)
	if err != nil {
		t.Fatal(err)
	}
	body, sig, ok := strings.Cut(string(note), "\n\n")
	if !ok || body != "example.com/log\n42\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=" || !strings.HasPrefix(sig, "\u2014 example.com/log ") {
		t.Fatalf("note:\n%s", note)
	}
	kr, err := ParseKeyring([]byte("# keys\n\n" + vkey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, ids, err := kr.Open(note)
	if err != nil || c.Size != 42 || !bytes.Equal(c.Root, root) || len(ids) != 1 || ids[0] != "example.com/log+"+s.KeyID() {
		t.Fatalf("open: %+v %v %v", c, ids, err)
	}
	if !strings.Contains(vkey, "+"+s.KeyID()+"+") {
		t.Fatalf("key id %s is not the verifier key's %s", s.KeyID(), vkey)
	}
	forged := bytes.Replace(note, []byte("\n42\n"), []byte("\n43\n"), 1)
	if _, _, err := kr.Open(forged); !errors.Is(err, ErrSignature) {
		t.Fatalf("a checkpoint with another size opened: %v", err)
	}
	other, _ := newKey(t, "example.com/log")
	note2, _ := other.Sign(42, root)
	if _, _, err := kr.Open(note2); !errors.Is(err, ErrSignature) {
		t.Fatalf("a checkpoint signed by an unknown key of the same name opened: %v", err)
	}
	for _, bad := range []string{"o\n1\n\n", "o\nx\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n", "o\n01\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n", "\n1\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n"} {
		if _, err := ParseCheckpoint(bad); !errors.Is(err, ErrCheckpointFormat) {
			t.Errorf("ParseCheckpoint(%q) = %v", bad, err)
		}
	}
}

// After a rotation the keyring holds both keys: checkpoints of either verify, the handover is
// signed by both, and a keyring of the new key alone cannot check the old checkpoints.
func TestKeyRotationKeepsOldCheckpointsVerifiable(t *testing.T) {
	home := t.TempDir()
	old, err := LoadOrCreateKey(home, "airlock.test/rot")
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateKey(home, "airlock.test/rot")
	if err != nil || again.KeyID() != old.KeyID() {
		t.Fatalf("a second load made another key: %v", err)
	}
	root := EmptyRoot()
	before, _ := old.Sign(0, root)
	o, next, err := RotateKey(home)
	if err != nil || o.KeyID() != old.KeyID() || next.KeyID() == old.KeyID() || next.Origin() != old.Origin() {
		t.Fatalf("rotate: %v", err)
	}
	handover, _ := next.Sign(0, root, o)
	after, _ := next.Sign(0, root)
	kr, err := LoadKeyring(filepath.Join(home, PublicFile))
	if err != nil || len(kr.Keys()) != 2 {
		t.Fatalf("public file after rotation: %v %v", kr, err)
	}
	for name, n := range map[string][]byte{"before": before, "handover": handover, "after": after} {
		if _, _, err := kr.Open(n); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, ids, _ := kr.Open(handover); len(ids) != 2 {
		t.Errorf("handover signed by %v, want both keys", ids)
	}
	if loaded, err := LoadKey(home); err != nil || loaded.KeyID() != next.KeyID() {
		t.Fatalf("the key file holds %v (%v), want the new key", loaded, err)
	}
	newOnly, _ := ParseKeyring([]byte(kr.Keys()[1]))
	if _, _, err := newOnly.Open(before); !errors.Is(err, ErrSignature) {
		t.Fatalf("an old checkpoint opened with the new key only: %v", err)
	}
}

// Published checkpoints reach a file (appended, read back one by one) and a webhook.
func TestPublishToFileAndWebhook(t *testing.T) {
	s, vkey := newKey(t, "airlock.test/pub")
	kr, _ := ParseKeyring([]byte(vkey))
	file := filepath.Join(t.TempDir(), "sub", "checkpoints.txt")
	var posted [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		posted = append(posted, b)
	}))
	defer srv.Close()
	for i := uint64(1); i <= 3; i++ {
		n, _ := s.Sign(i, bytes.Repeat([]byte{byte(i)}, HashSize))
		if err := Publish(context.Background(), file, n); err != nil {
			t.Fatal(err)
		}
		if err := Publish(context.Background(), srv.URL, n); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := readFile(file)
	notes := ReadCheckpoints(b)
	if len(notes) != 3 || len(posted) < 3 {
		t.Fatalf("file holds %d notes, webhook got %d", len(notes), len(posted))
	}
	for i, n := range notes {
		c, _, err := kr.Open(n)
		if err != nil || c.Size != uint64(i+1) || !bytes.Equal(n, posted[i]) {
			t.Fatalf("note %d: %+v %v", i, c, err)
		}
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer bad.Close()
	if err := Publish(context.Background(), bad.URL, notes[0]); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("a failing webhook: %v", err)
	}
}

// buildExport writes an export of n records, each signed, with a head and a final checkpoint.
func buildExport(tb testing.TB, s *Signer, n int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	h := Head{}
	var lines []Receipt
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		rec := Record{Type: TypeSettlement, Event: fmt.Sprintf("turn/c/%d/run/1/executed", i), Turn: fmt.Sprintf("turn/c/%d", i), Seq: 1,
			Capability: "system.health", Version: 1, At: at, Settlement: &Settlement{Outcome: SettlementExecuted, ResultDigest: Digest([]byte{byte(i)})}}
		leaf, err := rec.Leaf()
		if err != nil {
			tb.Fatal(err)
		}
		var ap Appended
		if h, ap, err = h.Append(LeafHash(leaf)); err != nil {
			tb.Fatal(err)
		}
		cp, err := s.Sign(ap.Index+1, ap.Root)
		if err != nil {
			tb.Fatal(err)
		}
		lines = append(lines, Receipt{Index: ap.Index, Event: rec.Event, Leaf: leaf, Proof: ap.Proof, Checkpoint: cp})
	}
	root, _ := h.Root()
	final, _ := s.Sign(h.Size, root)
	_ = w.Head(h.Size)
	_ = w.Checkpoint(final)
	for _, l := range lines {
		if err := w.Receipt(l); err != nil {
			tb.Fatal(err)
		}
	}
	_ = w.Flush()
	return buf.Bytes()
}

func TestVerifyExport(t *testing.T) {
	s, vkey := newKey(t, "airlock.test/v")
	kr, _ := ParseKeyring([]byte(vkey))
	exp := buildExport(t, s, 33)
	// The quick pass: the final checkpoint proves every record.
	rep, err := Verify(bytes.NewReader(exp), kr, VerifyOptions{})
	if err != nil || rep.Records != 33 || rep.Signed != 0 || rep.Checkpoints != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// A stream (no seek) is checked record by record, as is any export with EachRecord.
	if rep, err = Verify(io.MultiReader(bytes.NewReader(exp)), kr, VerifyOptions{}); err != nil || rep.Signed != 33 || rep.Checkpoints != 1 {
		t.Fatalf("a stream: %+v %v", rep, err)
	}
	if rep, err = Verify(bytes.NewReader(exp), kr, VerifyOptions{EachRecord: true}); err != nil || rep.Signed != 33 {
		t.Fatalf("each record: %+v %v", rep, err)
	}
	// A record with an HTML-like character survives export byte for byte.
	if !bytes.Contains(exp, []byte(`"outcome":"executed"`)) {
		t.Fatalf("export does not hold the records as JSON:\n%.300s", exp)
	}
	// One byte changed in one record's line names that record.
	lines := bytes.Split(exp, []byte("\n"))
	lines[12] = bytes.Replace(lines[12], []byte(`"seq":1`), []byte(`"seq":2`), 1)
	_, err = Verify(bytes.NewReader(bytes.Join(lines, []byte("\n"))), kr, VerifyOptions{})
	var te *TamperError
	if !errors.As(err, &te) || te.Problems[0].Index != 10 || te.Problems[0].Event != "turn/c/10/run/1/executed" {
		t.Fatalf("an edited record: %v", err)
	}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

// Removing the first records is named as such.
func TestVerifyNamesRemovedFirstRecords(t *testing.T) {
	s, vkey := newKey(t, "airlock.test/v")
	kr, _ := ParseKeyring([]byte(vkey))
	lines := bytes.Split(buildExport(t, s, 5), []byte("\n"))
	cut := append(append([][]byte{}, lines[:2]...), lines[4:]...) // head, checkpoint, records 2..4
	_, err := Verify(bytes.NewReader(bytes.Join(cut, []byte("\n"))), kr, VerifyOptions{})
	var te *TamperError
	if !errors.As(err, &te) || te.Problems[0].Index != 0 || !strings.Contains(te.Problems[0].What, "records 0 to 1 are missing (removed): the export starts with record 2") {
		t.Fatalf("first records removed: %v", err)
	}
}

// A publish URL's key never shows in Publish's errors (the worker logs them at every tick):
// not when the witness refuses, not when it cannot be reached.
func TestPublishErrorsMaskTheURLsKey(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) }))
	defer bad.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, dest := range []string{bad.URL + "/ck?token=W1tnessKey9", down.URL + "/ck?token=W1tnessKey9", "http://u:W1tnessKey9@" + strings.TrimPrefix(down.URL, "http://") + "/ck"} {
		err := Publish(context.Background(), dest, []byte("note\n"))
		if err == nil {
			t.Fatalf("%s: want an error", dest)
		}
		if strings.Contains(err.Error(), "W1tnessKey9") {
			t.Errorf("the URL's key shows: %v", err)
		}
	}
}
