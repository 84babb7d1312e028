package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Scripted is a Provider that serves fixed raw OpenAI-format bodies round by round: round r
// gets responses[r-1]. It records every request it receives. Useful for tests and for
// zero-latency benchmarks; safe for concurrent use.
type Scripted struct {
	responses []json.RawMessage

	mu       sync.Mutex
	requests []Request
}

var _ Provider = (*Scripted)(nil)

// NewScripted returns a provider serving responses in order. The bodies are copied; they are
// served byte for byte and never validated.
func NewScripted(responses ...json.RawMessage) *Scripted {
	s := &Scripted{responses: make([]json.RawMessage, len(responses))}
	for i, r := range responses {
		s.responses[i] = bytes.Clone(r)
	}
	return s
}

// Complete returns responses[req.Round-1] with FormatOpenAI. Errors: ErrInvalidRequest for a
// round below 1, ErrSessionExhausted beyond the last response.
func (s *Scripted) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("inference: scripted: %w", err)
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if req.Round < 1 {
		return Response{}, fmt.Errorf("%w: round %d", ErrInvalidRequest, req.Round)
	}
	if req.Round > len(s.responses) {
		return Response{}, fmt.Errorf("%w: scripted session has %d responses, round %d", ErrSessionExhausted, len(s.responses), req.Round)
	}
	return Response{Format: FormatOpenAI, Raw: bytes.Clone(s.responses[req.Round-1])}, nil
}

// Requests returns the requests received so far, in arrival order.
func (s *Scripted) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}
