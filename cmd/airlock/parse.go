package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/parse"
)

type parseCandidate struct {
	CallID string `json:"call_id"`
	// IDAssigned: the provider sent no id, so Airlock assigned CallID (parse.AssignedCallID).
	IDAssigned bool            `json:"id_assigned,omitempty"`
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Arguments  json.RawMessage `json:"arguments"`
}

type parseFailure struct {
	CallID     string       `json:"call_id"`
	IDAssigned bool         `json:"id_assigned,omitempty"`
	Name       string       `json:"name,omitempty"`
	Reason     parse.Reason `json:"reason"`
	Detail     string       `json:"detail,omitempty"`
}

type parseOutput struct {
	// Format is the format the response was read as (detected with --format auto); Stream
	// the framing of a streamed input ("" for a body).
	Format     parse.Format     `json:"format"`
	Stream     parse.Framing    `json:"stream,omitempty"`
	Candidates []parseCandidate `json:"candidates"`
	Failures   []parseFailure   `json:"failures"`
	// Text is the answer's prose (assembled from the deltas of a stream).
	Text string `json:"text"`
	// FinishReason is the response's own; Incomplete is set (truncated, abnormal_finish,
	// refusal, provider_error, unread_part, stream_fault) when the message did not end
	// normally or holds a part Airlock refuses, calls or not: its prose is no finished
	// answer. IncompleteDetail says why (escaped).
	FinishReason     string       `json:"finish_reason"`
	Incomplete       parse.Reason `json:"incomplete,omitempty"`
	IncompleteDetail string       `json:"incomplete_detail,omitempty"`
}

// maxParseInput bounds what `airlock parse` reads from stdin: a stream's framing and
// per-chunk envelopes make it several times its assembled body (parse.MaxBodyBytes, which
// still bounds a body and an assembled stream).
const maxParseInput = 64 << 20

// streamAuto is --stream given without a value: the framing is detected from the bytes.
const streamAuto = "auto"

func newParseCmd() *cobra.Command {
	var format, stream string
	cmd := &cobra.Command{
		Use:   "parse [--format auto|openai|anthropic|openai-responses] [--stream[=sse|ndjson]] < response",
		Short: "Strictly parse one raw provider response (a body or a stream) and print its candidates and parse failures",
		Long: `Read one raw provider response from stdin, exactly as the provider sent it, and print what
Airlock's strict parser makes of it:

  {"format":"openai|anthropic|openai-responses", "stream":"sse|ndjson" (streams only),
   "candidates":[{"call_id","id_assigned","name","version","arguments"}],
   "failures":[{"call_id","id_assigned","name","reason","detail"}],
   "text":"the prose", "finish_reason":"…",
   "incomplete":"truncated|abnormal_finish|refusal|provider_error|unread_part|stream_fault",
   "incomplete_detail":"why" (both only when the message did not end normally or was refused)}

Inputs:
  a body (default): an OpenAI chat.completion (and the compatible servers: Azure OpenAI,
    Gemini's OpenAI-compatible endpoint, Groq, OpenRouter, xAI, vLLM, Ollama /v1), an Ollama
    /api/chat body, an Anthropic message, an OpenAI Responses API response object, or the
    error body any of them sends.
  --stream: the streamed body as it came over the wire, framing detected from the bytes:
    server-sent events ("data:" and "event:" lines: OpenAI and compatible chat completion
    chunks, Anthropic Messages events, Responses API events; OpenAI's "data: [DONE]" ends it)
    or NDJSON (one JSON object a line: Ollama's /api/chat stream). --stream=sse or
    --stream=ndjson names the framing instead (write the '='). A stream is assembled into the
    body the same response has unstreamed, exactly as the worker does, then parsed; a stream
    that cannot be assembled exactly (an undocumented event, a name sent twice, no final
    event) is refused as stream_fault, naming what was wrong.
  --format auto (the default) detects the API from the body or the stream's events; name it
    (openai, anthropic, openai-responses) when an error-only stream does not say.

Nothing is repaired: empty or missing arguments, invalid or double-encoded JSON, trailing data,
names outside the grammar, duplicate call ids (every call of such a message fails), truncated
output, a message that did not end normally (abnormal_finish: any finish or stop reason other
than tool_calls, stop or function_call for OpenAI, stop for Ollama, tool_use or end_turn for
Anthropic, a Responses status other than completed, including a missing one) and tool calls
written as text are failures with a reason code. A part of the response Airlock does not
read (docs/providers.md lists every part read, ignored and refused) fails the whole message
and is named in incomplete_detail. Names are not checked against the registry here (the
executor does that at resolve), so version is the one the base registry advertises, or 0.
Useful for checking a captured response or a model server. Exit status 1, with what was
wrong, when stdin is not a provider response (nothing is skipped in silence).`,
		Example: `  # OpenAI chat completions (and compatible servers), a body and a stream:
  curl -s $BASE/v1/chat/completions -d @req.json | airlock parse
  curl -sN $BASE/v1/chat/completions -d @req-stream.json | airlock parse --stream
  # Anthropic Messages:
  airlock parse --format anthropic < message.json
  airlock parse --stream < message-events.sse
  # OpenAI Responses API:
  airlock parse --format openai-responses < response.json
  airlock parse --stream --format openai-responses < response-events.sse
  # Ollama native /api/chat (its stream is NDJSON):
  airlock parse < ollama-chat.json
  airlock parse --stream=ndjson < ollama-chat.ndjson`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			if cmd.Flags().Changed("stream") {
				return fmt.Errorf("airlock parse reads stdin and takes no arguments (got %q); name a framing with '=': --stream=sse or --stream=ndjson", args)
			}
			return fmt.Errorf("airlock parse reads the response from stdin and takes no arguments (got %q)", args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormatFlag(format)
			if err != nil {
				return err
			}
			framing, err := parseStreamFlag(cmd.Flags().Changed("stream"), stream)
			if err != nil {
				return err
			}
			raw, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxParseInput+1))
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if len(raw) > maxParseInput {
				return fmt.Errorf("stdin is larger than %d bytes: airlock parse reads one response", maxParseInput)
			}
			versions := map[string]int{}
			if reg, err := loadBaseRegistry(); err == nil {
				for _, c := range reg.Catalog(nil, time.Now()) {
					versions[c.Name] = c.Version
				}
			}
			out, err := parseInput(raw, f, framing, parse.Options{Versions: versions})
			if err != nil {
				return err
			}
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			// Model-written names and values reach a terminal: hidden runes as \u escapes.
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", display.JSON(b))
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", string(parse.FormatAuto), "response format: auto (detect), openai (chat completions, compatible servers and Ollama), anthropic or openai-responses")
	cmd.Flags().StringVar(&stream, "stream", "", "read a streamed body: --stream detects the framing, --stream=sse or --stream=ndjson names it")
	cmd.Flags().Lookup("stream").NoOptDefVal = streamAuto
	return cmd
}

func parseFormatFlag(format string) (parse.Format, error) {
	switch f := parse.Format(format); f {
	case "", parse.FormatAuto:
		return parse.FormatAuto, nil
	case parse.FormatOpenAI, parse.FormatAnthropic, parse.FormatResponses:
		return f, nil
	}
	return "", fmt.Errorf("--format must be auto, openai, anthropic or openai-responses, not %q", format)
}

// parseStreamFlag returns the framing --stream asks for: "" (a body), streamAuto or a
// parse.Framing.
func parseStreamFlag(set bool, v string) (parse.Framing, error) {
	if !set {
		return "", nil
	}
	switch parse.Framing(v) {
	case streamAuto, parse.FramingSSE, parse.FramingNDJSON:
		return parse.Framing(v), nil
	}
	return "", fmt.Errorf("--stream must be given alone (detect the framing) or as --stream=sse or --stream=ndjson, not %q", v)
}

// parseInput reads raw as a body (framing "") or a stream (streamAuto or a framing) of format
// (FormatAuto detects it) and returns what `airlock parse` prints. Every input it cannot read
// is an error saying what was wrong.
func parseInput(raw []byte, format parse.Format, framing parse.Framing, opts parse.Options) (parseOutput, error) {
	body := bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(body)) == 0 {
		return parseOutput{}, errors.New("stdin is empty: pipe one provider response into airlock parse")
	}
	var err error
	if framing == "" {
		if !json.Valid(body) {
			if kind := streamKind(body); kind != "" {
				return parseOutput{}, fmt.Errorf("%w: stdin is not one JSON body but %s; read it with --stream", parse.ErrUnrecognized, kind)
			}
		}
		if format == parse.FormatAuto {
			format = detectBodyFormat(body)
		}
	} else {
		if framing, err = streamFraming(body, framing); err != nil {
			return parseOutput{}, err
		}
		if format == parse.FormatAuto {
			if format, err = detectStreamFormat(body, framing); err != nil {
				return parseOutput{}, err
			}
		}
	}
	res, err := parse.Read(format, framing, bytes.NewReader(body), opts)
	if err != nil {
		return parseOutput{}, err
	}
	out := parseOutput{Format: format, Stream: framing, Candidates: []parseCandidate{}, Failures: []parseFailure{},
		Text: res.Text, FinishReason: res.FinishReason, Incomplete: res.Incomplete, IncompleteDetail: res.IncompleteDetail}
	for _, c := range res.Calls {
		if c.Candidate() {
			out.Candidates = append(out.Candidates, parseCandidate{CallID: c.CallID, IDAssigned: c.IDAssigned, Name: c.Name, Version: c.Version, Arguments: c.Arguments})
		} else {
			out.Failures = append(out.Failures, parseFailure{CallID: c.CallID, IDAssigned: c.IDAssigned, Name: c.Name, Reason: c.Reason, Detail: c.Detail})
		}
	}
	return out, nil
}

// firstInputLine is the first non-blank line of b, without its end.
func firstInputLine(b []byte) []byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		return b[:i]
	}
	return b
}

// sseLine reports whether line is a server-sent event field a provider stream starts with.
func sseLine(line []byte) bool {
	for _, p := range []string{"data:", "event:", "id:", "retry:", ":"} {
		if bytes.HasPrefix(line, []byte(p)) {
			return true
		}
	}
	return false
}

// streamKind names the stream body looks like ("" when it looks like none).
func streamKind(body []byte) string {
	line := firstInputLine(body)
	if sseLine(line) {
		return fmt.Sprintf("server-sent events (it starts with %s)", quoteStart(line))
	}
	if json.Valid(line) && bytes.HasPrefix(line, []byte("{")) && len(bytes.TrimSpace(body)) > len(line) {
		return "NDJSON (one JSON object a line, as Ollama's /api/chat streams)"
	}
	return ""
}

func quoteStart(line []byte) string {
	if len(line) > 40 {
		line = line[:40]
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(string(line), "?"))
}

// streamFraming checks or detects (streamAuto) the framing of a streamed body.
func streamFraming(body []byte, framing parse.Framing) (parse.Framing, error) {
	line := firstInputLine(body)
	whole := json.Valid(body)
	oneBody := func() error {
		return fmt.Errorf("%w: stdin is one JSON body, not a stream: read it without --stream", parse.ErrUnrecognized)
	}
	switch framing {
	case parse.FramingSSE:
		if !hasSSEData(body) {
			if whole {
				return "", oneBody()
			}
			return "", fmt.Errorf("%w: --stream=sse: stdin has no \"data:\" line, so it is not a server-sent event stream (it starts with %s)", parse.ErrUnrecognized, quoteStart(line))
		}
		return framing, nil
	case parse.FramingNDJSON:
		if sseLine(line) {
			return "", fmt.Errorf("%w: --stream=ndjson: stdin is server-sent events (it starts with %s); read it with --stream=sse", parse.ErrUnrecognized, quoteStart(line))
		}
		if whole && !ollamaLine(line) {
			return "", oneBody()
		}
		return framing, nil
	}
	switch {
	case sseLine(line):
		return parse.FramingSSE, nil
	case bytes.HasPrefix(line, []byte("{")):
		if !json.Valid(line) {
			if whole {
				return "", oneBody()
			}
			return "", fmt.Errorf("%w: stdin's first line is not a whole JSON object, so it is not NDJSON (nor server-sent events: no \"data:\" field first)", parse.ErrUnrecognized)
		}
		if whole && !ollamaLine(line) {
			return "", oneBody() // one JSON object without Ollama's done flag: a body
		}
		return parse.FramingNDJSON, nil
	}
	return "", fmt.Errorf("%w: cannot tell the stream's framing: stdin starts with %s, neither a server-sent event field (data:, event:) nor a JSON object (NDJSON); pass --stream=sse or --stream=ndjson", parse.ErrUnrecognized, quoteStart(line))
}

// ollamaLine reports whether line is a JSON object with Ollama's "done" flag, as every line of
// its stream has (a one-line stream is then told from a body).
func ollamaLine(line []byte) bool {
	var top map[string]json.RawMessage
	return json.Unmarshal(line, &top) == nil && top["done"] != nil
}

// hasSSEData reports whether body has a "data:" line.
func hasSSEData(body []byte) bool {
	for _, l := range bytes.FieldsFunc(body, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if bytes.HasPrefix(l, []byte("data:")) {
			return true
		}
	}
	return false
}

// detectBodyFormat is parse.DetectFormat plus the shape it leaves to the caller: an error
// body alone ({"error": …}: OpenAI, the compatible servers, Ollama and the Responses API send
// the same shape), read as openai, which reports it as provider_error. FormatAuto when none
// matches: Parse then says what the body is not.
func detectBodyFormat(body []byte) parse.Format {
	if f := parse.DetectFormat(body); f != "" {
		return f
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil && top["error"] != nil && top["type"] == nil && top["output"] == nil {
		return parse.FormatOpenAI
	}
	return parse.FormatAuto
}

// errFormatKnown stops detectStreamFormat's read at the first event that names its API.
var errFormatKnown = errors.New("format known")

// anthropicEvents are the Messages stream's event types (besides error, which the Responses
// API sends too).
var anthropicEvents = map[string]bool{
	"message_start": true, "message_delta": true, "message_stop": true, "ping": true,
	"content_block_start": true, "content_block_delta": true, "content_block_stop": true,
}

// detectStreamFormat names the API a stream came from by its first event that says: an
// OpenAI chat.completion.chunk (or an event with choices, or an error chunk without a type),
// an Anthropic Messages event, or a Responses API event ("response.…"). NDJSON is Ollama's.
// An error event alone does not say (Anthropic and the Responses API both send
// {"type":"error"}): the error asks for --format, it never guesses.
func detectStreamFormat(body []byte, framing parse.Framing) (parse.Format, error) {
	if framing == parse.FramingNDJSON {
		return parse.FormatOpenAI, nil
	}
	var found parse.Format
	events := 0
	var first string
	err := parse.ReadSSE(bytes.NewReader(body), func(data []byte) error {
		d := bytes.TrimSpace(data)
		if bytes.Equal(d, []byte("[DONE]")) {
			return nil
		}
		events++
		var ev map[string]json.RawMessage
		if json.Unmarshal(d, &ev) != nil {
			if first == "" {
				first = quoteStart(d)
			}
			return nil
		}
		var typ, object string
		_ = json.Unmarshal(ev["type"], &typ)
		_ = json.Unmarshal(ev["object"], &object)
		switch {
		case object == "chat.completion.chunk" || ev["choices"] != nil:
			found = parse.FormatOpenAI
		case anthropicEvents[typ]:
			found = parse.FormatAnthropic
		case strings.HasPrefix(typ, "response."):
			found = parse.FormatResponses
		case ev["type"] == nil && ev["error"] != nil:
			found = parse.FormatOpenAI // a chat completions error chunk
		default:
			if first == "" {
				first = quoteStart(d)
			}
			return nil
		}
		return errFormatKnown
	})
	if err != nil && !errors.Is(err, errFormatKnown) {
		return "", fmt.Errorf("read the stream: %w", err)
	}
	if found != "" {
		return found, nil
	}
	if events == 0 {
		return "", fmt.Errorf("%w: the stream carries no event data (no \"data:\" line)", parse.ErrUnrecognized)
	}
	return "", fmt.Errorf("%w: none of the stream's %d events names its API (the first: %s); pass --format openai, anthropic or openai-responses", parse.ErrUnrecognized, events, first)
}
