package inference

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/airlock-dev/airlock/internal/parse"
)

// Sink receives the displayable deltas of a streamed response as they arrive (issue 22 item 2).
// It is display only: the durable result is the assembled Response, which the strict parser
// reads after the stream ended, so no call is acted on before its message is complete.
// A Sink must not block for long: the provider's stream waits for it.
type Sink func(parse.Delta)

// Streamer is a Provider that can consume the provider's stream. Stream returns the same
// Response that Complete returns for the same answer unstreamed: Raw is the body the stream
// assembles to (parse.Assembler), so the parse, the history and the context stored are
// unchanged by streaming. A server that ignores the stream request and answers with a JSON
// body is read as that body (and sends no deltas).
//
// Errors: as Complete; in addition an error event inside the stream (an overloaded or
// rate-limited upstream) is a retryable *ProviderError, and a stream the transport cut is
// the transport's error (the Infer activity retries both).
type Streamer interface {
	Provider
	Stream(ctx context.Context, req Request, sink Sink) (Response, error)
}

// isEventStream reports whether resp is a server-sent event stream (else a JSON body).
func isEventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

// isNDJSON reports an NDJSON stream (Ollama's native API).
func isNDJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/x-ndjson"
}

// assemble reads a streamed body into asm, sending deltas to sink, and returns the assembled
// body. onEvent, when set, may turn an event into an error (an error event mid-stream).
func assemble(body io.Reader, sse bool, asm parse.Assembler, sink Sink, onEvent func([]byte) error) ([]byte, error) {
	framing := parse.FramingNDJSON
	if sse {
		framing = parse.FramingSSE
	}
	return parse.AssembleStream(body, framing, asm, sinkFunc(sink), onEvent)
}

// streamErrorEvent reports an error event inside a stream: an object whose "error" member is
// set and that carries no choices (OpenAI-compatible servers), or an Anthropic event of type
// "error". It is a retryable failure, like the same error as an HTTP status.
func streamErrorEvent(provider string, data []byte) error {
	var ev struct {
		Type    string          `json:"type"`
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return nil // the assembler records the fault
	}
	if (ev.Type == "error" || isJSONNull(ev.Choices)) && !isJSONNull(ev.Error) {
		return &ProviderError{Provider: provider, StatusCode: http.StatusOK, Retryable: true,
			Message: "error event in the stream: " + errorExcerpt(data)}
	}
	return nil
}

// sinkFunc adapts a Sink (nil: none) to parse.AssembleStream's callback.
func sinkFunc(sink Sink) func(parse.Delta) {
	if sink == nil {
		return nil
	}
	return sink
}
