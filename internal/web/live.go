package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The live inbox (issue 23): GET /events is a server-sent event stream that says "change"
// whenever the undecided confirmations change (store.ConfirmationsVersion), fed by PostgreSQL
// LISTEN/NOTIFY or polling on SQLite (store.WatchConfirmations). The page's script then fetches
// the inbox again and adds, updates and removes cards without a reload, keeping a card the
// approver is typing in. The stream carries only the version, never a card's content: what is
// shown still comes through the signed-in page and its escaping.

// liveHub shares one store watcher among every open stream of a Server.
type liveHub struct {
	mu      sync.Mutex
	version string
	subs    map[chan string]struct{}
	stop    context.CancelFunc // ends the watcher; nil while none runs
}

// subscribe returns a channel that receives each new version, and the current one.
func (h *liveHub) subscribe(s *Server) (chan string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[chan string]struct{}{}
	}
	if h.stop == nil {
		// The first stream starts the watcher; the last one to close stops it.
		var ctx context.Context
		ctx, h.stop = context.WithCancel(context.Background())
		v, _ := s.opt.Store.ConfirmationsVersion(ctx)
		h.version = v
		go h.run(ctx, s)
	}
	ch := make(chan string, 1)
	h.subs[ch] = struct{}{}
	return ch, h.version
}

func (h *liveHub) unsubscribe(ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, ch)
	if len(h.subs) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// run watches the store until ctx ends and sends each new version to every subscriber.
func (h *liveHub) run(ctx context.Context, s *Server) {
	w := s.opt.Store.WatchConfirmations(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w:
		}
		v, err := s.opt.Store.ConfirmationsVersion(ctx)
		if err != nil {
			continue
		}
		h.mu.Lock()
		if ctx.Err() == nil && v != h.version {
			h.version = v
			for ch := range h.subs {
				select { // a slow client gets the newest version only
				case <-ch:
				default:
				}
				ch <- v
			}
		}
		h.mu.Unlock()
	}
}

// eventsRecheck is how often an open /events stream checks that its session still lives (and
// sends a comment, which keeps proxies from closing the stream).
const eventsRecheck = 15 * time.Second

// events streams the version of the inbox: one "change" event on connect and one per change,
// and a comment every eventsRecheck. The stream lasts only as long as the session that opened
// it: signed out (on any instance), expired, its password changed or its approver removed, the
// stream ends at the next change or check (the browser's reconnection then meets the sign-in
// page), so a stolen cookie's stream does not outlive the session.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	ch, v := s.live.subscribe(s)
	defer s.live.unsubscribe(ch)
	send := func(v string) bool {
		if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", v); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(v) {
		return
	}
	every := s.recheck
	if every <= 0 {
		every = eventsRecheck
	}
	ping := time.NewTicker(every)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case v := <-ch:
			if !s.sessionLive(r.Context(), me) || !send(v) {
				return
			}
		case <-ping.C:
			if !s.sessionLive(r.Context(), me) {
				return
			}
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// sessionLive reports whether me's session is still live: in the store, not expired, its
// approver still in the approvers file with the password it signed in with (what authed checks
// on every request). It does not refresh the session's idle time: an open stream is no
// request. Any failure to tell is "no" (the stream ends; the browser reconnects through authed).
func (s *Server) sessionLive(ctx context.Context, me signedIn) bool {
	v, err := s.opt.Store.GetPageSession(ctx, hashID(me.id))
	if err != nil || expired(v, s.opt.Now()) || v.Approver != me.approver {
		return false
	}
	set, err := s.opt.Approvers()
	return err == nil && set.Has(v.Approver) && stampOf(set, v.Approver) == v.Stamp
}
