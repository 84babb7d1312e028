package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Live is the registry a worker serves now. A reload validates a new revision in full and
// swaps it in atomically; a revision that fails to load is refused and the old one keeps
// serving. Readers take one snapshot (Current) per request and use it throughout, so a
// request never mixes two revisions. Safe for concurrent use.
type Live struct {
	cur    atomic.Pointer[Registry]
	mu     sync.Mutex // serializes reloads
	status atomic.Pointer[ServeStatus]
}

// ServeStatus is what a Live registry reports to operators: the revision served, when it was
// loaded, and the last refused reload with its diagnostic (cleared by a successful one).
type ServeStatus struct {
	Revision     string    `json:"revision"`
	Capabilities int       `json:"capabilities"`
	LoadedAt     time.Time `json:"loaded_at"`
	Reloads      int       `json:"reloads"`
	// LastError is the diagnostic of the last refused reload ("" when the last one loaded).
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// NewLive serves r (a registry that loaded; never nil).
func NewLive(r *Registry) *Live {
	l := &Live{}
	l.cur.Store(r)
	l.status.Store(&ServeStatus{Revision: r.Revision(), Capabilities: len(r.caps), LoadedAt: time.Now().UTC()})
	return l
}

// Current is the registry served now.
func (l *Live) Current() *Registry { return l.cur.Load() }

// Status is the current reload status.
func (l *Live) Status() ServeStatus { return *l.status.Load() }

// ErrReloadRefused wraps the diagnostic of a reload that kept the old revision.
var ErrReloadRefused = errors.New("registry: reload refused; the previous revision keeps serving")

// Reload runs load and, when it returns a registry, swaps it in atomically (changed reports
// whether the revision differs from the one served before). When load fails, nothing is
// swapped: the error wraps ErrReloadRefused and the load's own error (a *LoadError with every
// diagnostic), and Status().LastError says why.
func (l *Live) Reload(load func() (*Registry, error)) (changed bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.status.Load()
	r, err := load()
	if err != nil {
		st := *prev
		st.LastError, st.LastErrorAt = err.Error(), time.Now().UTC()
		l.status.Store(&st)
		return false, fmt.Errorf("%w: %w", ErrReloadRefused, err)
	}
	old := l.cur.Swap(r)
	l.status.Store(&ServeStatus{Revision: r.Revision(), Capabilities: len(r.caps), LoadedAt: time.Now().UTC(), Reloads: prev.Reloads + 1})
	return old == nil || old.Revision() != r.Revision(), nil
}

// Watcher reloads a Live registry when one of its files changes (polled: modification time
// and size, every Interval) or when Trigger receives (for example on SIGHUP). No file system
// notification library is needed; a change is seen within one Interval.
type Watcher struct {
	Live *Live
	// Load builds the whole registry (documents, policy, implementations) from scratch.
	Load func() (*Registry, error)
	// Files are the registry and policy files to watch (embedded documents never change).
	Files []string
	// Interval is the poll period (default 1s).
	Interval time.Duration
	// Trigger, when set, forces a reload on every receive.
	Trigger <-chan os.Signal
	// OnReload, when set, is told of every reload attempt: the revision now served, whether
	// it changed, and the refusal (nil when the new revision loaded).
	OnReload func(revision string, changed bool, err error)

	last []fileStamp
}

// Prime records the files' current state as the state already loaded. Call it before the
// registry is loaded (or before the files may change) so no change is missed between the load
// and Run; Run primes itself when it was not.
func (w *Watcher) Prime() {
	w.last = make([]fileStamp, len(w.Files))
	for i, f := range w.Files {
		w.last[i] = stamp(f)
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
	err  string
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{err: err.Error()}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}
}

// Run watches until ctx ends. It returns ctx's error.
func (w *Watcher) Run(ctx context.Context) error {
	every := w.Interval
	if every <= 0 {
		every = time.Second
	}
	if len(w.last) != len(w.Files) {
		w.Prime()
	}
	last := w.last
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Trigger:
			forced = true
		case <-tick.C:
		}
		changed := forced
		for i, f := range w.Files {
			if s := stamp(f); s != last[i] {
				last[i], changed = s, true
			}
		}
		if !changed {
			continue
		}
		diff, err := w.Live.Reload(w.Load)
		if w.OnReload != nil {
			w.OnReload(w.Live.Current().Revision(), diff, err)
		}
	}
}
