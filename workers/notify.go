package workers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/channels"
	"github.com/airlock-dev/airlock/internal/store"
)

// NotifyFromEnv is the notify file AIRLOCK_NOTIFY_FILE names (issue 23), checked: it must parse
// and every channel must open (its secrets readable). Nil with the setting unset: no notices.
func NotifyFromEnv() (*notify.Source, error) {
	src, f, err := notify.SourceFromEnv()
	if src == nil || err != nil {
		return nil, err
	}
	for _, c := range f.Channels {
		if _, err := channels.Open(c); err != nil {
			return nil, fmt.Errorf("%s %s: %w", notify.EnvFile, os.Getenv(notify.EnvFile), err)
		}
	}
	return src, nil
}

// wireNotify makes acts' IssueConfirmation owe notices through the outbox of st.
func wireNotify(src *notify.Source, st *store.Store, log *slog.Logger) *notify.Outbox {
	return &notify.Outbox{Store: st, Source: src, Log: log}
}

// RunNotices runs the notice dispatcher of deps until ctx ends (nothing when no notify file is
// configured). metrics, if set, receives the dispatcher's counters.
func RunNotices(ctx context.Context, deps *Deps, log *slog.Logger, metrics *notify.Metrics) {
	if deps.Notify == nil {
		return
	}
	d := &notify.Dispatcher{Store: deps.Store, Source: deps.Notify, Open: channels.Open, Log: log, Metrics: metrics}
	if v := os.Getenv("AIRLOCK_NOTIFY_LEASE"); v != "" {
		// How long a claimed delivery is held: a worker killed mid-send has its deliveries
		// sent again (same delivery id) by another worker once it runs out.
		if l, err := time.ParseDuration(v); err == nil && l >= time.Second {
			d.Lease = l
		} else {
			log.Warn("AIRLOCK_NOTIFY_LEASE is not a duration of at least 1s; using the default 2m", "value", v)
		}
	}
	_ = d.Run(ctx)
}
