package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
)

// streamReads is how many times PostgreSQL has read the stream_events table of the test's
// schema (sequential plus index scans, from pg_stat_user_tables): the store work followers
// cause.
func streamReads(t *testing.T, dbURL string) int64 {
	t.Helper()
	u, _ := url.Parse(dbURL)
	schema := u.Query().Get("search_path")
	db, err := sqlx.Open("postgres", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.Get(&n, `SELECT COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'stream_events'`, schema); err != nil {
		t.Fatal(err)
	}
	return n
}

// idleReadsPerSecond measures streamReads over d (PostgreSQL's statistics lag by up to a
// second: the window starts and ends after a settle of 1.5 s).
func idleReadsPerSecond(t *testing.T, dbURL string, d time.Duration) float64 {
	time.Sleep(1500 * time.Millisecond)
	a := streamReads(t, dbURL)
	time.Sleep(d)
	time.Sleep(1500 * time.Millisecond)
	b := streamReads(t, dbURL)
	return float64(b-a) / (d + 1500*time.Millisecond).Seconds()
}

// TestAppAPIFollowersBench (issue 32, item 4): N followers (AIRLOCK_BENCH_FOLLOWERS, default
// 200; the benchmark is 1000) on one API process, one per turn, each an SSE
// connection. Measured: the store reads per second while every turn is idle (LISTEN/NOTIFY:
// none expected; the polling /v1/stream endpoint's cost for 50 followers beside it), and the
// delay from an event's write to its delivery at the follower (p50/p95/p99 over 2 events a
// follower, written at 200/s).
func TestAppAPIFollowersBench(t *testing.T) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("AIRLOCK_BENCH_FOLLOWERS")); err == nil && v > 0 {
		n = v
	}
	cfg := testConfig(t)
	st := openStore(t, cfg)
	key, sum, _ := appapi.NewKey()
	keys, err := appapi.NewKeys([]appapi.Caller{{Name: "bench", Principal: "alice", KeySHA256: sum}})
	if err != nil {
		t.Fatal(err)
	}
	starter, _ := clients.LoadCredential(itStarterFile)
	srv, err := appapi.New(appapi.Options{Store: st, Temporal: dial(t), Keys: keys, Starter: starter, MaxStreamsPerCaller: n + 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if srv.Polling() {
		t.Fatal("LISTEN/NOTIFY unavailable")
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	turns := make([]string, n)
	for i := range turns {
		conv := fmt.Sprintf("bench-%d", i)
		turns[i] = "turn/" + conv + "/1"
		if _, _, err := st.ReserveAPITurn(ctx, store.APITurn{Caller: "bench", Key: conv, BodySHA256: "x", WorkflowID: turns[i], Conversation: conv, Principal: "alice"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendStreamEvent(ctx, turns[i], "start", stream.RunStarted, []byte(`{"type":"RUN_STARTED"}`), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	baseline := idleReadsPerSecond(t, cfg.StoreURL(), 3*time.Second)

	tr := &http.Transport{MaxIdleConnsPerHost: n + 10, MaxConnsPerHost: 0}
	hc := &http.Client{Transport: tr}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	var connected sync.WaitGroup
	connected.Add(n)
	var done sync.WaitGroup
	for i := range n {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			conv := fmt.Sprintf("bench-%d", i)
			req, _ := http.NewRequestWithContext(fctx, "GET", hs.URL+"/v1/conversations/"+conv+"/turns/1/events", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Last-Event-ID", "1")
			resp, err := hc.Do(req)
			connected.Done()
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("follower %d: %d", i, resp.StatusCode)
				return
			}
			sseRead(t, resp.Body, func(ev sseEvent) bool {
				var v struct {
					Value struct {
						T int64 `json:"t"`
					} `json:"value"`
				}
				if ev.Type == "CUSTOM" && json.Unmarshal(ev.Data, &v) == nil && v.Value.T > 0 {
					d := time.Since(time.Unix(0, v.Value.T))
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
				return fctx.Err() != nil
			})
		}(i)
	}
	connected.Wait()
	idle := idleReadsPerSecond(t, cfg.StoreURL(), 5*time.Second)

	// The polling endpoint (/v1/stream, stream.Handler) for comparison: 50 followers.
	const pollers = 50
	token := strings.Repeat("b", 8) + "0123456789abcdefghijklmnopqrstuvwxyz"
	old := httptest.NewServer(stream.Handler(st, token, stream.DefaultPoll))
	t.Cleanup(old.Close)
	pctx, pcancel := context.WithCancel(ctx)
	for i := range pollers {
		go func(i int) {
			req, _ := http.NewRequestWithContext(pctx, "GET", old.URL+"/v1/stream?turn="+turns[i]+"&after=1", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := hc.Do(req); err == nil {
				sseRead(t, resp.Body, func(sseEvent) bool { return pctx.Err() != nil })
				resp.Body.Close()
			}
		}(i)
	}
	polling := idleReadsPerSecond(t, cfg.StoreURL(), 3*time.Second)
	pcancel()

	// Delivery latency: 2 events a follower, written at about 200/s in total.
	const perFollower = 2
	tick := time.NewTicker(5 * time.Millisecond)
	for round := range perFollower {
		for i := range n {
			<-tick.C
			p := fmt.Sprintf(`{"type":"CUSTOM","name":"bench","value":{"t":%d}}`, time.Now().UnixNano())
			if _, err := st.AppendStreamEvent(ctx, turns[i], fmt.Sprintf("b%d", round), stream.Custom, []byte(p), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= n*perFollower || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < n*perFollower {
		t.Fatalf("delivered %d of %d events", len(lat), n*perFollower)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	t.Logf("BENCH followers=%d: stream_events reads/s idle: before followers %.1f, with %d followers %.1f; polling /v1/stream with %d followers %.1f; delivery latency p50 %s p95 %s p99 %s max %s (%d events)",
		n, baseline, n, idle, pollers, polling, q(0.5).Round(time.Microsecond), q(0.95).Round(time.Microsecond), q(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), len(lat))
	if idle > baseline+1 {
		t.Errorf("idle followers read the store: %.1f reads/s (baseline %.1f)", idle, baseline)
	}
	if q(0.95) > 250*time.Millisecond {
		t.Errorf("p95 delivery latency %s (target 50 ms; 250 ms tolerated on a shared test machine)", q(0.95))
	}
}
