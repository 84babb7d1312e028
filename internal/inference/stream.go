package inference

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// maxEventBytes bounds one server-sent event (and one NDJSON line); a longer one is an error.
const maxEventBytes = 8 << 20

// errStreamEnd is returned by an event handler to stop reading ([DONE], message_stop).
var errStreamEnd = errors.New("end of stream")

// readSSE reads a text/event-stream body (WHATWG server-sent events: lines end in LF, CRLF or
// CR; "data:" lines are joined with LF; a blank line dispatches; comments and the id, retry
// and event fields are not needed) and hands each event's data, exactly as sent, to handle.
func readSSE(r io.Reader, handle func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data bytes.Buffer
	hasData := false
	dispatch := func() error {
		if !hasData {
			return nil
		}
		d := append([]byte(nil), data.Bytes()...)
		data.Reset()
		hasData = false
		return handle(d)
	}
	var line []byte
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			if len(line) > 0 {
				if e := sseField(line, &data, &hasData); e != nil {
					return e
				}
			}
			return dispatch()
		}
		if err != nil {
			return err
		}
		if b != '\n' && b != '\r' {
			if len(line) >= maxEventBytes || data.Len() >= maxEventBytes {
				return fmt.Errorf("inference: stream: an event exceeds %d bytes", maxEventBytes)
			}
			line = append(line, b)
			continue
		}
		if b == '\r' {
			if nb, err := br.Peek(1); err == nil && nb[0] == '\n' {
				_, _ = br.ReadByte()
			}
		}
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if err := sseField(line, &data, &hasData); err != nil {
			return err
		}
		line = line[:0]
	}
}

func sseField(line []byte, data *bytes.Buffer, hasData *bool) error {
	if line[0] == ':' {
		return nil // comment (keep-alive)
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	if string(name) == "data" {
		if *hasData {
			data.WriteByte('\n')
		}
		data.Write(value)
		*hasData = true
	}
	return nil
}

// readNDJSON hands each non-empty line of an NDJSON body to handle.
func readNDJSON(r io.Reader, handle func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			if err := handle(append([]byte(nil), l...)); err != nil {
				return err
			}
		}
	}
	return sc.Err()
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
	handle := func(data []byte) error {
		if sse && bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			return errStreamEnd
		}
		if onEvent != nil {
			if err := onEvent(data); err != nil {
				return err
			}
		}
		for _, d := range asm.Add(data) {
			if sink != nil {
				sink(d)
			}
		}
		return nil
	}
	var err error
	if sse {
		err = readSSE(body, handle)
	} else {
		err = readNDJSON(body, handle)
	}
	if err != nil && !errors.Is(err, errStreamEnd) {
		return nil, err
	}
	return asm.Body(), nil
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
