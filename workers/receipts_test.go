package workers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
)

// The housekeeping publishes a checkpoint when the log grew (and only then), each verifiable
// with the public key, and applies the retention.
func TestReceiptsHousekeepingPublishesAndPrunes(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(home, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sg, err := receipts.LoadOrCreateKey(home, "airlock.test/keeper")
	if err != nil {
		t.Fatal(err)
	}
	st.UseReceiptKey(sg)
	add := func(key string) {
		if _, err := st.AppendAudit(ctx, store.AuditEvent{Key: key, Outcome: "executed", WorkflowID: "turn/k/1", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	published := filepath.Join(home, "published", "checkpoints.txt")
	t.Setenv(EnvReceiptsPublish, published)
	t.Setenv(EnvRetentionStreams, "1h")
	cfg, err := ReceiptsConfigFromEnv()
	if err != nil || !cfg.Active() || cfg.Every != time.Minute {
		t.Fatalf("config %+v %v", cfg, err)
	}
	if _, err := st.AppendStreamEvent(ctx, "s", "old", "RUN_STARTED", []byte(`{}`), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	k := &receiptsKeeper{st: st, cfg: cfg, log: slog.New(slog.DiscardHandler)}
	add("a")
	for i := 0; i < 2; i++ { // the second tick finds the log as it was: nothing new to publish
		if err := k.tick(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	add("b")
	if err := k.tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := receipts.LoadKeyring(filepath.Join(home, receipts.PublicFile))
	if err != nil {
		t.Fatal(err)
	}
	notes := receipts.ReadCheckpoints(b)
	if len(notes) != 2 {
		t.Fatalf("published %d checkpoints, want 2 (one per growth):\n%s", len(notes), b)
	}
	for i, want := range []uint64{2, 4} {
		c, _, err := kr.Open(notes[i])
		if err != nil || c.Size != want {
			t.Fatalf("checkpoint %d: size %d (%v), want %d", i, c.Size, err, want)
		}
	}
	if ev, _ := st.StreamEvents(ctx, "s", 0, 10); len(ev) != 0 {
		t.Fatalf("the old stream event was kept: %+v", ev)
	}
	t.Setenv(EnvRetentionAudit, "soon")
	if _, err := ReceiptsConfigFromEnv(); err == nil {
		t.Fatal("a retention that is no duration was accepted")
	}
}
