package store

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestNoticeOutbox: enqueue is idempotent by delivery id, a claim leases a due row to one
// claimant only (concurrent claimers get disjoint rows), an expired lease is claimed again
// with the attempt counted, a row not yet due is not claimed, finishing records the state and
// the stats count each state.
func TestNoticeOutbox(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		ds := []Delivery{
			{ID: "nt-a", ConfirmationID: "cf-1", Channel: "hook", Kind: "pending", Payload: json.RawMessage(`{"x":1}`), DueAt: now},
			{ID: "nt-b", ConfirmationID: "cf-1", Channel: "mail", Kind: "pending", Payload: json.RawMessage(`{"x":2}`), DueAt: now},
			{ID: "nt-c", ConfirmationID: "cf-1", Channel: "hook", Kind: "reminder", Payload: json.RawMessage(`{}`), DueAt: now.Add(time.Minute)},
		}
		if n, err := s.EnqueueDeliveries(ctx, ds); err != nil || n != 3 {
			t.Fatalf("enqueue: %d %v", n, err)
		}
		if n, err := s.EnqueueDeliveries(ctx, ds); err != nil || n != 0 {
			t.Fatalf("enqueue again (a retry) wrote %d rows, err %v", n, err)
		}
		if _, err := s.EnqueueDeliveries(ctx, []Delivery{{ID: "nt-x", ConfirmationID: "cf", Channel: "c", Kind: "k", Payload: json.RawMessage(`{`), DueAt: now}}); err == nil {
			t.Fatal("invalid payload accepted")
		}
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := s.ClaimDeliveries(ctx, now, time.Minute, 10)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, d := range c {
					got[d.ID]++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(got) != 2 || got["nt-a"] != 1 || got["nt-b"] != 1 {
			t.Fatalf("concurrent claims: %v (want nt-a and nt-b once each; nt-c is not due)", got)
		}
		if c, _ := s.ClaimDeliveries(ctx, now.Add(30*time.Second), time.Minute, 10); len(c) != 0 {
			t.Fatalf("claimed under a live lease: %+v", c)
		}
		c, err := s.ClaimDeliveries(ctx, now.Add(2*time.Minute), time.Minute, 10)
		if err != nil || len(c) != 3 {
			t.Fatalf("after the lease ran out: %+v %v", c, err)
		}
		for _, d := range c {
			if d.ID == "nt-a" && d.Attempts != 2 {
				t.Fatalf("attempts of a re-claimed row: %d", d.Attempts)
			}
		}
		later := now.Add(2 * time.Minute)
		if err := s.FinishDelivery(ctx, "nt-a", NoticeSent, "", later, later); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishDelivery(ctx, "nt-b", NoticeQueued, "hook: receiver answered 500", later.Add(time.Hour), later); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishDelivery(ctx, "nt-c", NoticeSkipped, "decided first", later, later); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishDelivery(ctx, "nt-c", "bogus", "", later, later); err == nil {
			t.Fatal("unknown state accepted")
		}
		if c, _ := s.ClaimDeliveries(ctx, later.Add(time.Minute), time.Minute, 10); len(c) != 0 {
			t.Fatalf("claimed a finished or backed-off row: %+v", c)
		}
		d, err := s.GetDelivery(ctx, "nt-a")
		if err != nil || d.State != NoticeSent || d.DoneAt == nil || string(d.Payload) != `{"x":1}` {
			t.Fatalf("sent row: %+v %v", d, err)
		}
		if _, err := s.GetDelivery(ctx, "nt-zz"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing row: %v", err)
		}
		st, err := s.NoticeOutboxStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued != 1 || st.Retrying != 1 || st.Sent != 1 || st.Skipped != 1 || st.Failed != 0 || st.LastError != "mail: hook: receiver answered 500" || st.OldestDue == nil {
			t.Fatalf("stats: %+v", st)
		}
		if ls, _ := s.ListDeliveries(ctx, "cf-1"); len(ls) != 3 {
			t.Fatalf("list: %+v", ls)
		}
	})
}
