package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/channels"
	"github.com/airlock-dev/airlock/internal/store"
)

// doctorNotify checks the notify file (issue 23): it parses, every channel opens (secrets
// readable; never printed), and the store's outbox has no abandoned or stuck deliveries.
func doctorNotify(ctx context.Context) []doctorCheck {
	path := os.Getenv(notify.EnvFile)
	if path == "" {
		return []doctorCheck{{Name: "notify", OK: true, Warn: true, Detail: "no notify file: approvers get no webhook, Slack or e-mail notice",
			Fix: "set " + notify.EnvFile + " (docs/approvers.md: Notifying approvers)"}}
	}
	f, _, err := notify.NewSource(path).Current()
	if err != nil {
		return []doctorCheck{{Name: "notify", Detail: scrub(err), Fix: "fix the notify file (docs/approvers.md: Notifying approvers)"}}
	}
	out := []doctorCheck{}
	bad := 0
	for _, c := range f.Channels {
		if _, err := channels.Open(c); err != nil {
			bad++
			out = append(out, doctorCheck{Name: "notify", Detail: scrub(err), Fix: "set the channel's secret file or environment variable"})
		}
	}
	if bad == 0 {
		out = append(out, doctorCheck{Name: "notify", OK: true, Detail: fmt.Sprintf("%s: %d channel(s), %d route(s)", path, len(f.Channels), len(f.Routes))})
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.OpenExisting(ctx, cfg.StoreURL())
	if err != nil {
		return out // the store check says why
	}
	defer st.Close()
	s, err := st.NoticeOutboxStats(ctx)
	if err != nil {
		return append(out, doctorCheck{Name: "outbox", Detail: scrub(err), Fix: "start a worker once (it applies the outbox migration)"})
	}
	c := doctorCheck{Name: "outbox", OK: true, Detail: fmt.Sprintf("%d queued (%d retrying), %d sent, %d skipped, %d given up", s.Queued, s.Retrying, s.Sent, s.Skipped, s.Failed)}
	if s.LastError != "" {
		c.Detail += "; last failure " + s.LastError
	}
	stuck := s.OldestDue != nil && time.Since(*s.OldestDue) > 5*time.Minute
	if s.Failed > 0 || s.Retrying > 0 || stuck {
		c.Warn, c.Fix = true, "a channel fails or no worker delivers: see the last failure, airlock_notice_failures_total, and that a worker runs with "+notify.EnvFile
	}
	return append(out, c)
}
