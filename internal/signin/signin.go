// Package signin limits failed sign-ins: a sliding-window count of failures per key (an
// approver name, a client address), shared by every surface that checks a secret (the
// approver page's password and passkey registration, the codec server's token), so each
// counts the same way and none can be raced past its limit (issue 21, item 4: every sign-in
// surface limits attempts).
package signin

import (
	"sync"
	"time"
)

// MaxKeys bounds the keys a Limiter remembers: past it, keys whose failures all left the
// window are dropped, and if that is not enough the counts start afresh (a spray of client
// addresses cannot grow the map without bound; the price is that such a spray resets them).
const MaxKeys = 10000

// Limiter counts failures per key over a sliding window. Safe for concurrent use.
type Limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu       sync.Mutex
	failures map[string][]time.Time
}

// NewLimiter allows max failures per key within window; now is the clock (time.Now when nil).
func NewLimiter(max int, window time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{max: max, window: window, now: now, failures: map[string][]time.Time{}}
}

func (l *Limiter) recent(key string, now time.Time) []time.Time {
	kept := l.failures[key][:0]
	for _, t := range l.failures[key] {
		if now.Sub(t) < l.window {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		delete(l.failures, key)
		return nil
	}
	l.failures[key] = kept
	return kept
}

// Attempt reserves one attempt for keys, atomically: when any key already has max failures
// in the window it reports blocked and how long until the oldest of them leaves it; otherwise
// it counts the attempt as a failure for every key now, before the secret is checked, so
// concurrent guesses cannot all pass the check before any is counted. An attempt that
// succeeds is given back with Forgive(at, keys...).
func (l *Limiter) Attempt(keys ...string) (at time.Time, blocked bool, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if r := l.recent(k, now); len(r) >= l.max {
			return now, true, l.window - now.Sub(r[0])
		}
	}
	if len(l.failures)+len(keys) > MaxKeys {
		for k := range l.failures {
			l.recent(k, now) // drops keys with no failure left in the window
		}
		if len(l.failures)+len(keys) > MaxKeys {
			l.failures = map[string][]time.Time{}
		}
	}
	for _, k := range keys {
		l.failures[k] = append(l.recent(k, now), now)
	}
	return now, false, 0
}

// Blocked reports whether key has max failures in the window now, without counting anything
// (a request that checks no secret).
func (l *Limiter) Blocked(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recent(key, now)) >= l.max
}

// Forgive takes back the attempt Attempt reserved at at for keys (it succeeded, or failed for
// a reason that is not the caller's guess).
func (l *Limiter) Forgive(at time.Time, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		ts := l.failures[k]
		for i, t := range ts {
			if t.Equal(at) {
				l.failures[k] = append(ts[:i:i], ts[i+1:]...)
				break
			}
		}
		if len(l.failures[k]) == 0 {
			delete(l.failures, k)
		}
	}
}
