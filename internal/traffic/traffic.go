// Package traffic reads the provider-traffic corpus (../shared/provider-traffic): responses
// that model providers really sent, one file each, and the exact reading its MANIFEST.jsonl
// expects of each (issue 31). It only loads files and judges readings; reading a response is
// internal/parse's job, so the parser's tests, the end-to-end test through real turns and
// `airlock parse` all hold a file to the same expectation.
package traffic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is the corpus as seen from a package directory of this repository
// (internal/<pkg>), where `go test` runs.
const DefaultDir = "../../../shared/provider-traffic"

// Entry is one line of MANIFEST.jsonl: a file, where it came from, and what must be read of it.
type Entry struct {
	File       string `json:"file"`
	Provider   string `json:"provider"`
	API        string `json:"api"`
	Streamed   bool   `json:"streamed"`
	Kind       string `json:"kind"`
	SourceRepo string `json:"source_repo"`
	License    string `json:"license"`
	// HTTPStatus is the status the recording kept (nil when the cassette kept none; 200 then).
	HTTPStatus *int   `json:"http_status"`
	Expect     Expect `json:"expect"`
}

// Expect is either an exact reading (Refuse "") or a refusal with the reasons it may carry.
type Expect struct {
	// Text is the prose; FinishReason the provider's finish or stop reason (nil: the
	// provider sent none).
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Calls        []Call  `json:"calls"`
	// Refuse says why the response must be refused; RefuseAs lists the reasons Airlock may
	// refuse it with (parse reasons, or "unrecognized" for a body that is not a response).
	Refuse   string   `json:"refuse"`
	RefuseAs []string `json:"refuse_as"`
	Note     string   `json:"note"`
}

// Call is one expected call. ID nil or "" means the provider sent none, so Airlock assigns one.
// Arguments is JSON text, compared as a JSON value.
type Call struct {
	ID        *string `json:"id"`
	Name      string  `json:"name"`
	Arguments string  `json:"arguments"`
}

// Refused reports whether the entry expects a refusal.
func (e Entry) Refused() bool { return e.Expect.Refuse != "" }

// Status is the HTTP status the response came with (200 when the recording kept none).
func (e Entry) Status() int {
	if e.HTTPStatus == nil {
		return 200
	}
	return *e.HTTPStatus
}

// Shape names how an entry's bytes are framed and which reader they need.
type Shape string

// Shapes of the corpus's files (README of the corpus: file names and framing).
const (
	ShapeChatJSON      Shape = "chat-json"      // an OpenAI chat.completion body (and compatible servers)
	ShapeChatSSE       Shape = "chat-sse"       // chat.completion.chunk server-sent events
	ShapeAnthropicJSON Shape = "anthropic-json" // an Anthropic message body
	ShapeAnthropicSSE  Shape = "anthropic-sse"  // Anthropic Messages stream events
	ShapeOllamaJSON    Shape = "ollama-json"    // an Ollama /api/chat body
	ShapeOllamaNDJSON  Shape = "ollama-ndjson"  // an Ollama /api/chat NDJSON stream
	ShapeResponsesJSON Shape = "responses-json" // an OpenAI Responses API response object
	ShapeResponsesSSE  Shape = "responses-sse"  // Responses API stream events
)

// Shape returns the framing and reader an entry needs, from its provider, API and streamed
// flag; an entry that names none of the known APIs is an error that says so.
func (e Entry) Shape() (Shape, error) {
	api := strings.ToLower(e.API)
	switch {
	case e.Provider == "anthropic" && api == "messages":
		return pick(e.Streamed, ShapeAnthropicSSE, ShapeAnthropicJSON), nil
	case api == "responses":
		return pick(e.Streamed, ShapeResponsesSSE, ShapeResponsesJSON), nil
	case e.Provider == "ollama" && strings.HasPrefix(api, "/api/chat"):
		return pick(e.Streamed, ShapeOllamaNDJSON, ShapeOllamaJSON), nil
	case strings.HasPrefix(api, "chat.completions"):
		return pick(e.Streamed, ShapeChatSSE, ShapeChatJSON), nil
	}
	return "", fmt.Errorf("traffic: %s: provider %q api %q is not an API the corpus reader knows", e.File, e.Provider, e.API)
}

func pick(streamed bool, s, j Shape) Shape {
	if streamed {
		return s
	}
	return j
}

// ErrNoCorpus means the corpus directory or its manifest is missing.
var ErrNoCorpus = errors.New("traffic: provider-traffic corpus not found")

// Load reads dir/MANIFEST.jsonl. Every line must decode and name a file that exists and a
// shape the reader knows; an empty manifest is an error.
func Load(dir string) ([]Entry, error) {
	data, err := os.ReadFile(filepath.Join(dir, "MANIFEST.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCorpus, err)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(line))
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("traffic: MANIFEST.jsonl line %d: %w", n, err)
		}
		if e.File == "" || strings.Contains(e.File, "/") || strings.Contains(e.File, `\`) {
			return nil, fmt.Errorf("traffic: MANIFEST.jsonl line %d: file %q is not a file name of the corpus", n, e.File)
		}
		if _, err := e.Shape(); err != nil {
			return nil, fmt.Errorf("traffic: MANIFEST.jsonl line %d: %w", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, e.File)); err != nil {
			return nil, fmt.Errorf("traffic: MANIFEST.jsonl line %d: %w", n, err)
		}
		if e.Refused() && len(e.Expect.RefuseAs) == 0 {
			return nil, fmt.Errorf("traffic: MANIFEST.jsonl line %d: %s expects a refusal but names no reason it may carry", n, e.File)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("traffic: MANIFEST.jsonl: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: MANIFEST.jsonl lists no file", ErrNoCorpus)
	}
	return out, nil
}

// Reading is what Airlock read of a response, in the terms of the manifest: prose, finish
// reason, calls, and the reason the whole response was refused ("" none). Err is set when the
// response could not be read at all (a body that is no response).
type Reading struct {
	Text         string
	FinishReason string
	Calls        []ReadCall
	Refused      string
	Detail       string
	Err          error
}

// ReadCall is one call as Airlock read it. Reason is its parse failure ("" a candidate);
// Assigned reports an id Airlock assigned because the provider sent none.
type ReadCall struct {
	ID        string
	Assigned  bool
	Name      string
	Arguments string
	Reason    string
}

// Check compares a reading with the entry's expectation and returns every difference, one
// sentence each (nil: the reading is exactly what the manifest says).
func (e Entry) Check(r Reading) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	x := e.Expect
	if e.Refused() {
		got := r.Refused
		if r.Err != nil {
			got = "unrecognized"
		}
		if got == "" {
			add("read as an answer (%d calls, text %q), want a refusal as one of %v: %s", len(r.Calls), r.Text, x.RefuseAs, x.Refuse)
			return diffs
		}
		for _, ok := range x.RefuseAs {
			if ok == got {
				return nil
			}
		}
		add("refused as %s (%s), want one of %v: %s", got, detailOf(r), x.RefuseAs, x.Refuse)
		return diffs
	}
	if r.Err != nil {
		add("not read: %v", r.Err)
		return diffs
	}
	if r.Refused != "" {
		add("refused as %s (%s), want an answer", r.Refused, r.Detail)
	}
	if r.Text != x.Text {
		add("text %q, want %q", r.Text, x.Text)
	}
	want := ""
	if x.FinishReason != nil {
		want = *x.FinishReason
	}
	if r.FinishReason != want {
		add("finish reason %q, want %q", r.FinishReason, want)
	}
	if len(r.Calls) != len(x.Calls) {
		add("%d calls, want %d", len(r.Calls), len(x.Calls))
		return diffs
	}
	for i, c := range r.Calls {
		w := x.Calls[i]
		if c.Reason != "" {
			add("call %d refused as %s, want a candidate", i, c.Reason)
		}
		if w.ID == nil || *w.ID == "" {
			if !c.Assigned {
				add("call %d: id %q not marked assigned, but the provider sent none", i, c.ID)
			}
		} else if c.ID != *w.ID || c.Assigned {
			add("call %d: id %q (assigned %v), want the provider's %q", i, c.ID, c.Assigned, *w.ID)
		}
		if c.Name != w.Name {
			add("call %d: name %q, want %q", i, c.Name, w.Name)
		}
		if !JSONEqual(c.Arguments, w.Arguments) {
			add("call %d: arguments %s, want %s", i, c.Arguments, w.Arguments)
		}
	}
	return diffs
}

func detailOf(r Reading) string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return r.Detail
}

// JSONEqual reports whether a and b are the same JSON value (numbers compared as written).
func JSONEqual(a, b string) bool {
	var x, y any
	da := json.NewDecoder(strings.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(strings.NewReader(b))
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}
