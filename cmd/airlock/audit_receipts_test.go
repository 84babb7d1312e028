package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
)

// appendRows writes n audit rows (numbered from first) to the store at dbURL, signing with the
// log key in home, as a worker does.
func appendRows(t *testing.T, home, dbURL string, first, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sg, err := receipts.LoadOrCreateKey(home, "airlock.test/cli")
	if err != nil {
		t.Fatal(err)
	}
	st.UseReceiptKey(sg)
	for i := first; i < first+n; i++ {
		if _, err := st.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("turn/c/%d/run/1/executed", i), WorkflowID: fmt.Sprintf("turn/c/%d", i),
			RunID: "run", Seq: 1, CapabilityID: "system.health", Version: 1, Outcome: "executed", Stage: "execute"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditExportVerifyCheckpointRotate runs the receipts commands end to end on a SQLite
// store: export and verify, a published checkpoint, a key rotation (older checkpoints still
// verify, with the public file that keeps both keys) and a cut tail that only the published
// checkpoint shows.
func TestAuditExportVerifyCheckpointRotate(t *testing.T) {
	home := t.TempDir()
	db := "sqlite:" + filepath.Join(home, "airlock.db")
	flags := []string{"--home", home, "--database-url", db}
	cli := func(args ...string) (string, error) { return run(t, "", append(args, flags...)...) }
	export := filepath.Join(home, "export.jsonl")
	published := filepath.Join(home, "published.txt")
	pub := filepath.Join(home, receipts.PublicFile)

	appendRows(t, home, db, 0, 5) // 10 records
	if out, err := cli("audit", "checkpoint", "--publish", published); err != nil || !strings.HasPrefix(out, "airlock.test/cli\n10\n") {
		t.Fatalf("checkpoint: %v\n%s", err, out)
	}
	if _, err := cli("audit", "export", "--out", export); err != nil {
		t.Fatal(err)
	}
	out, err := cli("audit", "verify", export, "--key", pub, "--checkpoint", published, "--each-record")
	if err != nil || !strings.Contains(out, "verified: 10 records; 3 checkpoints consistent with them; 10 records checked by their own signature") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	oldKeys, _ := os.ReadFile(pub)
	// The SIEM form: one line a record from --from on, each with its time, identity and record.
	out, err = cli("audit", "export", "--siem", "--from", "8")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("siem export from 8: %v\n%s", err, out)
	}
	var sl receipts.SIEMLine
	if err := json.Unmarshal([]byte(lines[1]), &sl); err != nil || sl.Index != 9 || sl.Type != receipts.TypeSettlement ||
		sl.Event != "turn/c/4/run/1/executed" || sl.Source != "airlock.receipts" || !sl.Signed || sl.Time.IsZero() || len(sl.Record) == 0 {
		t.Fatalf("siem line %+v (%v)", sl, err)
	}

	if out, err := cli("audit", "rotate-key"); err != nil || strings.Count(out, "\u2014 airlock.test/cli ") != 2 {
		t.Fatalf("rotate-key: the handover checkpoint is not signed by both keys: %v\n%s", err, out)
	}
	appendRows(t, home, db, 5, 3) // 6 more records, signed with the new key
	if _, err := cli("audit", "checkpoint", "--publish", published); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("audit", "export", "--out", export); err != nil {
		t.Fatal(err)
	}
	out, err = cli("audit", "verify", export, "--key", pub, "--checkpoint", published)
	if err != nil || !strings.Contains(out, "verified: 16 records; ") {
		t.Fatalf("verify after the rotation, with both keys: %v\n%s", err, out)
	}
	// A verifier that knows only the old key still checks what it signed, and is told
	// exactly which records it cannot check.
	oldOnly := filepath.Join(home, "old.pub")
	if err := os.WriteFile(oldOnly, oldKeys, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli("audit", "verify", export, "--key", oldOnly)
	if !errors.Is(err, errVerifyFailed) || !strings.Contains(out, "record 10 (turn/c/5/run/1/executed): its checkpoint") || strings.Contains(out, "record 9 ") {
		t.Fatalf("verify with the old key only: %v\n%s", err, out)
	}

	// The tail cut with SQL, head and kept checkpoints made to agree: only the published
	// checkpoint shows it.
	cutTail(t, filepath.Join(home, "airlock.db"), 12)
	if _, err := cli("audit", "export", "--out", export, "--sign=false"); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("audit", "verify", export, "--key", pub); err != nil {
		t.Fatalf("a careful cut verifies without a published checkpoint (that is what publishing is for): %v\n%s", err, out)
	}
	out, err = cli("audit", "verify", export, "--key", pub, "--checkpoint", published)
	if !errors.Is(err, errVerifyFailed) || !strings.Contains(out, "record 12: missing: the tail was cut") || !strings.Contains(out, "records 12 to 15 are missing") {
		t.Fatalf("verify of a cut log with the published checkpoints: %v\n%s", err, out)
	}
}

// cutTail removes the SQLite store's records from index keep on, sets the head to the first
// keep records and drops the kept checkpoints beyond them: a cut that leaves no trace inside
// the database.
func cutTail(t *testing.T, path string, keep int64) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT record FROM receipts WHERE idx < ? ORDER BY idx`, keep)
	if err != nil {
		t.Fatal(err)
	}
	h := receipts.Head{}
	for rows.Next() {
		var leaf []byte
		if err := rows.Scan(&leaf); err != nil {
			t.Fatal(err)
		}
		if h, _, err = h.Append(receipts.LeafHash(leaf)); err != nil {
			t.Fatal(err)
		}
	}
	rows.Close()
	for _, q := range []string{`DELETE FROM receipts WHERE idx >= ?`, `DELETE FROM receipt_checkpoints WHERE size >= ?`} {
		if _, err := db.Exec(q, keep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`UPDATE receipt_head SET size = ?, frontier = ?`, h.Size, receipts.JoinHashes(h.Frontier)); err != nil {
		t.Fatal(err)
	}
}
