package workers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
)

// Receipts housekeeping beside the worker (issue 36): checkpoints published where the operator
// chose, and the retention the operator set. Neither runs inside a turn.

// Settings of the receipts housekeeping (environment).
const (
	// EnvReceiptsPublish: where to publish the log's signed checkpoints, comma-separated: file
	// paths (appended to) and http(s) URLs (POSTed to). Unset: nothing is published.
	EnvReceiptsPublish = "AIRLOCK_RECEIPTS_PUBLISH"
	// EnvReceiptsEvery: how often the housekeeping runs (a Go duration, default 1m).
	EnvReceiptsEvery = "AIRLOCK_RECEIPTS_EVERY"
	// EnvRetentionAudit: audit rows older than this duration are removed once the receipts log
	// holds their records (store.Prune). Unset: kept.
	EnvRetentionAudit = "AIRLOCK_RETENTION_AUDIT"
	// EnvRetentionStreams: client-stream events older than this duration are removed. Unset: kept.
	EnvRetentionStreams = "AIRLOCK_RETENTION_STREAMS"
)

// ReceiptsConfig is the housekeeping's configuration.
type ReceiptsConfig struct {
	Publish          []string
	Every            time.Duration
	AuditRetention   time.Duration
	StreamsRetention time.Duration
}

// ReceiptsConfigFromEnv reads ReceiptsConfig from the environment; a duration that does not
// parse is an error naming the variable.
func ReceiptsConfigFromEnv() (ReceiptsConfig, error) {
	c := ReceiptsConfig{Every: time.Minute}
	for _, d := range strings.Split(os.Getenv(EnvReceiptsPublish), ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.Publish = append(c.Publish, d)
		}
	}
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{EnvReceiptsEvery, &c.Every}, {EnvRetentionAudit, &c.AuditRetention}, {EnvRetentionStreams, &c.StreamsRetention}} {
		s := strings.TrimSpace(os.Getenv(v.name))
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return ReceiptsConfig{}, fmt.Errorf("%s=%q: want a positive duration such as 720h", v.name, s)
		}
		*v.dst = d
	}
	return c, nil
}

// Active reports whether there is anything to do.
func (c ReceiptsConfig) Active() bool {
	return len(c.Publish) > 0 || c.AuditRetention > 0 || c.StreamsRetention > 0
}

// receiptsKeeper runs the housekeeping; published is the log size last published.
type receiptsKeeper struct {
	st        *store.Store
	cfg       ReceiptsConfig
	log       *slog.Logger
	published uint64
	started   bool
}

// RunReceipts runs the housekeeping every cfg.Every until ctx ends.
func RunReceipts(ctx context.Context, st *store.Store, cfg ReceiptsConfig, log *slog.Logger) {
	k := &receiptsKeeper{st: st, cfg: cfg, log: log}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		if err := k.tick(ctx, time.Now()); err != nil && ctx.Err() == nil {
			log.Warn("receipts housekeeping", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick publishes a checkpoint when the log grew since the last one published, then prunes.
func (k *receiptsKeeper) tick(ctx context.Context, now time.Time) error {
	if len(k.cfg.Publish) > 0 && k.st.ReceiptKey() != nil {
		if _, err := k.st.SequenceReceipts(ctx); err != nil {
			return err
		}
		h, err := k.st.ReceiptHead(ctx)
		if err != nil {
			return err
		}
		if !k.started || h.Size != k.published {
			note, err := k.st.SignReceiptHead(ctx)
			if err != nil {
				return err
			}
			for _, d := range k.cfg.Publish {
				if err := receipts.Publish(ctx, d, note); err != nil {
					return err
				}
			}
			c, _ := receipts.ParseCheckpoint(strings.SplitN(string(note), "\n\n", 2)[0] + "\n")
			k.published, k.started = c.Size, true
		}
	}
	var r store.Retention
	if k.cfg.AuditRetention > 0 {
		r.AuditBefore = now.Add(-k.cfg.AuditRetention)
	}
	if k.cfg.StreamsRetention > 0 {
		r.StreamsBefore = now.Add(-k.cfg.StreamsRetention)
	}
	if r != (store.Retention{}) {
		p, err := k.st.Prune(ctx, r)
		if err != nil {
			return err
		}
		if p.AuditRows+p.StreamEvents > 0 {
			k.log.Info("retention", "audit_rows", p.AuditRows, "stream_events", p.StreamEvents)
		}
	}
	return nil
}
