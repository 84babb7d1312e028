package signin

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Concurrent guesses cannot pass the limit: of 50 at once, exactly max get through.
func TestAttemptIsAtomic(t *testing.T) {
	l := NewLimiter(5, time.Minute, nil)
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, blocked, _ := l.Attempt("ip:1"); !blocked {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	if passed.Load() != 5 {
		t.Fatalf("%d concurrent attempts passed, want 5", passed.Load())
	}
}

// The window slides, a forgiven attempt does not count, any blocked key blocks, and Blocked
// counts nothing.
func TestWindowForgiveAndKeys(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiter(2, time.Minute, c.now)
	at, _, _ := l.Attempt("user:alice", "ip:1")
	l.Forgive(at, "user:alice", "ip:1") // a good sign-in
	for range 2 {
		c.add(time.Second)
		if _, blocked, _ := l.Attempt("user:alice", "ip:1"); blocked {
			t.Fatal("blocked before the limit")
		}
	}
	if !l.Blocked("user:alice") || !l.Blocked("ip:1") || l.Blocked("ip:2") {
		t.Fatal("Blocked disagrees with the counts")
	}
	if _, blocked, wait := l.Attempt("user:bob", "ip:1"); !blocked || wait != time.Minute-time.Second {
		t.Fatalf("another name from a blocked address: blocked=%v wait=%s", blocked, wait)
	}
	c.add(time.Minute)
	if _, blocked, _ := l.Attempt("user:alice", "ip:1"); blocked {
		t.Fatal("still blocked after the window slid")
	}
}

// A spray of keys keeps the map bounded by MaxKeys.
func TestMaxKeys(t *testing.T) {
	l := NewLimiter(5, time.Minute, nil)
	for i := range MaxKeys + 100 {
		l.Attempt(fmt.Sprintf("ip:%d", i))
	}
	if n := len(l.failures); n > MaxKeys {
		t.Fatalf("%d keys remembered, want at most %d", n, MaxKeys)
	}
}
