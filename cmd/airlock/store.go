package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/internal/store"
)

// openExistingStore opens the configured store for a command that needs one to exist
// (pending, audit, turn show, turn start, replay, approve, deny): it never creates a store, and
// a missing one is an error naming where it looked and what to check. Only the worker (and
// dev and eval, which run workers) create the store, with store.Open.
func openExistingStore(ctx context.Context) (*store.Store, error) {
	st, err := store.OpenExisting(ctx, cfg.StoreURL())
	if errors.Is(err, store.ErrNoStore) {
		check := "AIRLOCK_DATABASE_URL (--database-url)"
		if cfg.DatabaseURL == "" {
			check = fmt.Sprintf("AIRLOCK_HOME (--home, now %q; the store is airlock.db in it) or set AIRLOCK_DATABASE_URL", cfg.Home)
		}
		return nil, fmt.Errorf("%w\n  check %s, or create the store by starting a worker first (make run, or airlock worker)", err, check)
	}
	return st, err
}
