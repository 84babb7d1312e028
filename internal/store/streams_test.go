package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestStreamEvents: events of a stream are numbered from 1 in append order, a retried
// append (same dedup) writes nothing and returns the first seq, a reader resumes after a seq,
// streams are independent, and concurrent writers get distinct consecutive seqs.
func TestStreamEvents(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		for i := 1; i <= 3; i++ {
			seq, err := s.AppendStreamEvent(ctx, "turn/c/1", fmt.Sprintf("e%d", i), "TEXT_MESSAGE_CONTENT", json.RawMessage(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","delta":"%d"}`, i)), at)
			if err != nil || seq != int64(i) {
				t.Fatalf("append %d: seq %d err %v", i, seq, err)
			}
		}
		if seq, err := s.AppendStreamEvent(ctx, "turn/c/1", "e2", "TEXT_MESSAGE_CONTENT", json.RawMessage(`{"type":"X"}`), at); err != nil || seq != 2 {
			t.Fatalf("retried append: seq %d err %v", seq, err)
		}
		if seq, err := s.AppendStreamEvent(ctx, "turn/c/2", "e1", "RUN_STARTED", json.RawMessage(`{"type":"RUN_STARTED"}`), at); err != nil || seq != 1 {
			t.Fatalf("other stream: seq %d err %v", seq, err)
		}
		evs, err := s.StreamEvents(ctx, "turn/c/1", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 || string(evs[0].Payload) != `{"type":"TEXT_MESSAGE_CONTENT","delta":"2"}` || !evs[0].At.Equal(at) {
			t.Fatalf("resume after 1: %+v", evs)
		}
		if evs, _ := s.StreamEvents(ctx, "nobody", 0, 0); len(evs) != 0 {
			t.Fatalf("unknown stream: %+v", evs)
		}
		if _, err := s.AppendStreamEvent(ctx, "turn/c/1", "bad", "X", json.RawMessage(`[1]`), at); err == nil {
			t.Fatal("a non-object payload was stored")
		}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.AppendStreamEvent(ctx, "turn/c/3", fmt.Sprintf("w%d", i), "CUSTOM", json.RawMessage(`{"type":"CUSTOM"}`), at); err != nil {
					t.Errorf("writer %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		evs, err = s.StreamEvents(ctx, "turn/c/3", 0, 0)
		if err != nil || len(evs) != 8 {
			t.Fatalf("concurrent: %d events, %v", len(evs), err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("concurrent seqs %+v", evs)
			}
		}
	})
}
