package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/lib/pq"
)

// Unavailable tells a store that cannot be reached from a statement the store refused.
func TestUnavailable(t *testing.T) {
	// A real refused connection: nothing listens on port 1.
	_, refused := Open(context.Background(), "postgres://airlock:airlock@127.0.0.1:1/airlock?sslmode=disable&connect_timeout=2")
	if refused == nil {
		t.Fatal("a store on a closed port opened")
	}
	// Real failed HTTP requests: a closed port and a name that does not resolve (RFC 6761
	// .invalid): a model provider or a fetched page that cannot be reached, not the store.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	_, httpRefused := http.Get("http://" + addr + "/v1/messages")
	_, httpDNS := http.Get("http://api.provider.invalid/v1/messages")
	if httpRefused == nil || httpDNS == nil {
		t.Fatalf("requests that must fail: %v, %v", httpRefused, httpDNS)
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("infer: %w", httpRefused), false},
		{fmt.Errorf("infer: %w", httpDNS), false},
		// A model's stream that broke mid-answer, marked by the Infer activity: not the store,
		// though the same error from the store's connection would be.
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("infer round 1: %w", Elsewhere(fmt.Errorf("stream: %w", io.ErrUnexpectedEOF))), false},
		{fmt.Errorf("save turn result: %w", &pq.Error{Code: "57P01", Message: "terminating connection due to administrator command"}), true},
		{&pq.Error{Code: "57P03", Message: "the database system is starting up"}, true},
		{&pq.Error{Code: "08006"}, true},
		{&pq.Error{Code: "23505", Message: "duplicate key value violates unique constraint"}, false},
		{errors.New("store: audit event needs a Key"), false},
		{nil, false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
