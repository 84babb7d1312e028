package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/airlockworker"
	"github.com/airlock-dev/airlock/registry"
)

// Tickets talks to the team's ticket system over its REST API.
type Tickets struct {
	// BaseURL is the ticket system's base URL; Token, when set, is sent as a bearer token.
	BaseURL, Token string
	// Client is the HTTP client (nil: one with a 10 s timeout).
	Client *http.Client
}

// GetArgs are get_ticket's arguments: the JSON Schema the model sees is generated from this
// struct, and the executor validates every call against it before the code runs.
type GetArgs struct {
	ID int `json:"id" validate:"required,min=1" jsonschema:"description=The ticket number,minimum=1"`
}

// CreateArgs are create_ticket's arguments.
type CreateArgs struct {
	Title    string `json:"title" validate:"required,max=200" jsonschema:"description=One-line summary,maxLength=200"`
	Body     string `json:"body" validate:"max=4000" jsonschema:"description=What is wrong and what was tried,maxLength=4000"`
	Priority string `json:"priority" validate:"oneof=low normal high" jsonschema:"enum=low,enum=normal,enum=high"`
}

// Get is tickets.get@1: read one ticket.
func (t *Tickets) Get() registry.Implementation {
	return registry.Typed("tickets.get", 1, func(ctx context.Context, a *GetArgs, _ registry.Invocation) (registry.Output, error) {
		return t.do(ctx, http.MethodGet, fmt.Sprintf("/tickets/%d", a.ID), nil, "")
	})
}

// Create is tickets.create@1: open a ticket. It sends the proposal's idempotency key, so the
// ticket system can refuse a repeat; Airlock's execution ledger already runs it at most once.
func (t *Tickets) Create() registry.Implementation {
	return registry.Typed("tickets.create", 1, func(ctx context.Context, a *CreateArgs, inv registry.Invocation) (registry.Output, error) {
		body, err := json.Marshal(a)
		if err != nil {
			return registry.Output{}, err
		}
		return t.do(ctx, http.MethodPost, "/tickets", body, airlockworker.IdempotencyKey(inv))
	})
}

func (t *Tickets) do(ctx context.Context, method, path string, body []byte, key string) (registry.Output, error) {
	url := strings.TrimRight(t.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return registry.Output{}, fmt.Errorf("tickets: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	c := t.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		// The request may have reached the ticket system: for a create that is an unknown
		// outcome, never a failure someone might retry.
		if method != http.MethodGet {
			return registry.Output{}, fmt.Errorf("tickets: %s %s: %w: %w", method, path, registry.ErrOutcomeUnknown, err)
		}
		return registry.Output{}, fmt.Errorf("tickets: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return registry.Output{}, fmt.Errorf("tickets: read answer: %w", err)
	}
	out := registry.Output{SourceURL: url}
	if json.Valid(b) {
		out.Data = b
	} else {
		out.Data, _ = json.Marshal(string(b))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out.Error = "ticket system answered " + resp.Status
	}
	return out, nil
}
