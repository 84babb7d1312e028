package inference

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/parse"
)

var caseFiles = []string{"../../../shared/cases/provider-responses.jsonl", "../../../shared/cases/finish-reasons.jsonl"}

// caseBodies reads every case's raw input body.
func caseBodies(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, path := range caseFiles {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("case file is required: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var c struct {
				ID    string          `json:"id"`
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatal(err)
			}
			out[c.ID] = c.Input
		}
	}
	if len(out) == 0 {
		t.Fatal("no cases")
	}
	return out
}

// streamingServer answers every request with body streamed: server-sent events (or NDJSON for
// an Ollama body) from parse.Disassemble with string pieces of piece bytes, written to the
// connection write bytes at a time with a flush after each, so the client's reads are cut
// anywhere, inside multi-byte characters included.
func streamingServer(t *testing.T, body []byte, piece, write int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		format := parse.DetectFormat(body)
		events, err := parse.Disassemble(format, body, piece)
		if err != nil {
			t.Errorf("disassemble: %v", err)
			return
		}
		var all bytes.Buffer
		if parse.IsOllamaBody(body) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			for _, e := range events {
				all.Write(e)
				all.WriteByte('\n')
			}
		} else {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range events {
				all.WriteString("data: ")
				all.Write(e)
				all.WriteString("\r\n\r\n")
			}
			if format == parse.FormatOpenAI {
				all.WriteString("data: [DONE]\n\n")
			}
		}
		b := all.Bytes()
		fl := w.(http.Flusher)
		for i := 0; i < len(b); i += write {
			_, _ = w.Write(b[i:min(i+write, len(b))])
			fl.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamEveryCaseThroughTheProvider: every case of ../shared/cases, served streamed by a
// real local server in string pieces of 1 and 4 bytes over a connection written 1 and 7
// bytes at a time, gives through the provider's Stream a Response whose parse is exactly the
// parse of the unstreamed body (OpenAI cases through the OpenAI adapter, Anthropic cases
// through the Anthropic adapter).
func TestStreamEveryCaseThroughTheProvider(t *testing.T) {
	req := Request{Round: 1, Model: "m", Messages: []Message{{Role: RoleUser, Content: "go"}}}
	bodies := caseBodies(t)
	bodies["ollama"] = []byte(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"Grüße 😀","tool_calls":[{"function":{"name":"do_it","arguments":{"q":"東京"}}}]},"done":true,"done_reason":"stop","eval_count":3}`)
	for id, body := range bodies {
		format := parse.DetectFormat(body)
		want, err := parse.Parse(format, body, parse.Options{Round: 1})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for _, cut := range [][2]int{{1, 1}, {4, 7}} {
			srv := streamingServer(t, body, cut[0], cut[1])
			var p Streamer
			if format == parse.FormatAnthropic {
				p = newTestAnthropic(t, srv.URL)
			} else {
				p = newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1"})
			}
			resp, err := p.Stream(context.Background(), req, nil)
			if err != nil {
				t.Fatalf("%s %v: Stream: %v", id, cut, err)
			}
			got, err := parse.Parse(format, resp.Raw, parse.Options{Round: 1})
			if err != nil {
				t.Fatalf("%s %v: assembled body: %v\n%s", id, cut, err, resp.Raw)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %v: streamed parse differs\n got %+v\nwant %+v", id, cut, got, want)
			}
		}
	}
}

// TestOpenAIStreamRequestAndDeltas: the streamed request asks to stream with usage, deltas
// arrive in order, the usage of the last chunk is read, and an error chunk is retryable.
func TestOpenAIStreamRequestAndDeltas(t *testing.T) {
	var seen []byte
	body := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"On it.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"do_it","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":7}}`)
	inner := streamingServer(t, body, 2, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(seen))
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL + "/v1"})
	var text, args strings.Builder
	var starts int
	resp, err := p.Stream(context.Background(), Request{Round: 1, Model: "m", Messages: []Message{{Role: RoleUser, Content: "go"}}}, func(d parse.Delta) {
		switch d.Kind {
		case parse.DeltaText:
			text.WriteString(d.Text)
		case parse.DeltaCallStart:
			starts++
		case parse.DeltaCallArgs:
			args.WriteString(d.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(seen, []byte(`"stream":true`)) || !bytes.Contains(seen, []byte(`"include_usage":true`)) {
		t.Errorf("request %s", seen)
	}
	if text.String() != "On it." || args.String() != `{"a":1}` || starts != 1 {
		t.Errorf("deltas: text %q args %q starts %d", text.String(), args.String(), starts)
	}
	if resp.Usage != (Usage{InputTokens: 11, OutputTokens: 7}) {
		t.Errorf("usage %+v", resp.Usage)
	}

	errSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\ndata: {\"error\":{\"message\":\"upstream overloaded\"}}\n\n")
	}))
	t.Cleanup(errSrv.Close)
	_, err = newTestOpenAI(t, OpenAIConfig{BaseURL: errSrv.URL + "/v1"}).Stream(context.Background(), Request{Round: 1, Model: "m", Messages: []Message{{Role: RoleUser, Content: "go"}}}, nil)
	var pe *ProviderError
	if !errors.As(err, &pe) || !pe.Retryable || !strings.Contains(err.Error(), "upstream overloaded") {
		t.Fatalf("error chunk: %v", err)
	}
}

// TestStreamFallsBackToJSON: a server that ignores "stream": true and answers JSON is read as
// the unstreamed body.
func TestStreamFallsBackToJSON(t *testing.T) {
	srv, _ := fakeServer(t, http.StatusOK, okBody)
	resp, err := newTestOpenAI(t, OpenAIConfig{BaseURL: srv.URL}).Stream(context.Background(), Request{Round: 1, Model: "m", Messages: []Message{{Role: RoleUser, Content: "go"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Raw) != okBody {
		t.Fatalf("Raw %s", resp.Raw)
	}
}

// TestReadSSE: line endings LF, CRLF and CR, multi-line data, comments and other fields.
func TestReadSSE(t *testing.T) {
	in := ": keep-alive\r\nevent: x\rdata: a\ndata:b\r\nid: 7\r\n\r\ndata: {\"c\":1}\n\nretry: 5\n\n"
	var got []string
	if err := parse.ReadSSE(strings.NewReader(in), func(d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"a\nb", `{"c":1}`}) {
		t.Fatalf("got %q", got)
	}
}
