package parse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// This file reads streamed bodies as providers frame them (server-sent events, NDJSON) and
// feeds them to an Assembler, so the inference adapters, `airlock parse --stream` and the
// provider-traffic tests assemble a stream the same way.

// MaxEventBytes bounds one server-sent event (and one NDJSON line); a longer one is an error
// (ErrEventTooLarge), never a cut event.
const MaxEventBytes = 8 << 20

// ErrEventTooLarge reports an event or line longer than MaxEventBytes.
var ErrEventTooLarge = errors.New("parse: stream event too large")

// ErrStreamEnd may be returned by a ReadSSE or ReadNDJSON handler to stop reading early
// ([DONE], message_stop); the readers then return nil.
var ErrStreamEnd = errors.New("end of stream")

// ReadSSE reads a text/event-stream body (WHATWG server-sent events: lines end in LF, CRLF or
// CR; "data:" lines are joined with LF; a blank line dispatches; comments and the id, retry
// and event fields are not needed: every provider repeats the event type inside the data) and
// hands each event's data, exactly as sent, to handle. A handler error stops the read and is
// returned (nil for ErrStreamEnd).
func ReadSSE(r io.Reader, handle func(data []byte) error) error {
	err := readSSE(r, handle)
	if errors.Is(err, ErrStreamEnd) {
		return nil
	}
	return err
}

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
				sseField(line, &data, &hasData)
			}
			return dispatch()
		}
		if err != nil {
			return err
		}
		if b != '\n' && b != '\r' {
			if len(line) >= MaxEventBytes || data.Len() >= MaxEventBytes {
				return fmt.Errorf("%w: an event exceeds %d bytes", ErrEventTooLarge, MaxEventBytes)
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
		sseField(line, &data, &hasData)
		line = line[:0]
	}
}

func sseField(line []byte, data *bytes.Buffer, hasData *bool) {
	if line[0] == ':' {
		return // comment (keep-alive)
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
}

// ReadNDJSON hands each non-empty line of an NDJSON body (Ollama's native stream) to handle.
// A handler error stops the read and is returned (nil for ErrStreamEnd).
func ReadNDJSON(r io.Reader, handle func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxEventBytes)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			if err := handle(append([]byte(nil), l...)); err != nil {
				if errors.Is(err, ErrStreamEnd) {
					return nil
				}
				return err
			}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("%w: a line exceeds %d bytes", ErrEventTooLarge, MaxEventBytes)
	}
	return sc.Err()
}

// Framing is how a streamed body is framed.
type Framing string

// Framings of provider streams.
const (
	FramingSSE    Framing = "sse"    // text/event-stream (OpenAI, Anthropic, Responses, compatible servers)
	FramingNDJSON Framing = "ndjson" // application/x-ndjson (Ollama /api/chat)
)

// AssembleStream reads a whole streamed body framed as framing into asm, sending each
// displayable delta to sink (nil: none), and returns the assembled body for Parse. onEvent,
// when set, sees each event's data first and may stop the read with an error (an error event
// the caller handles itself). OpenAI's "[DONE]" sentinel ends an SSE stream. Errors: the
// reader's (a cut transport), ErrEventTooLarge, or onEvent's; what the provider sent is
// never an error here (faults are carried in the body, see Assembler).
func AssembleStream(body io.Reader, framing Framing, asm Assembler, sink func(Delta), onEvent func([]byte) error) ([]byte, error) {
	handle := func(data []byte) error {
		if framing == FramingSSE && bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			return ErrStreamEnd
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
	switch framing {
	case FramingSSE:
		err = ReadSSE(body, handle)
	case FramingNDJSON:
		err = ReadNDJSON(body, handle)
	default:
		return nil, fmt.Errorf("%w: unknown stream framing %q", ErrUnrecognized, string(framing))
	}
	if err != nil {
		return nil, err
	}
	return asm.Body(), nil
}

// Read reads one whole response as a provider sent it: an unstreamed body (framing "") or a
// stream framed as framing, assembled first (FramingNDJSON is Ollama's /api/chat stream and
// needs FormatOpenAI). It is what `airlock parse` and the provider-traffic tests run; the
// inference adapters run the same two steps with their deltas shown as they arrive.
// Errors: as AssembleStream and Parse.
func Read(format Format, framing Framing, body io.Reader, opts Options) (Result, error) {
	if framing == "" {
		raw, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
		if err != nil {
			return Result{}, err
		}
		if len(raw) > MaxBodyBytes {
			return Result{}, fmt.Errorf("%w: the body exceeds %d bytes", ErrTooLarge, MaxBodyBytes)
		}
		return Parse(format, raw, opts)
	}
	var asm Assembler
	var err error
	if framing == FramingNDJSON {
		if format != FormatOpenAI && format != FormatAuto && format != "" {
			return Result{}, fmt.Errorf("%w: an NDJSON stream is Ollama's, read as format %q, not %q", ErrUnrecognized, FormatOpenAI, format)
		}
		format, asm = FormatOpenAI, NewOllamaAssembler()
	} else if asm, err = NewAssembler(format); err != nil {
		return Result{}, err
	}
	raw, err := AssembleStream(body, framing, asm, nil, nil)
	if err != nil {
		return Result{}, err
	}
	return Parse(format, raw, opts)
}
