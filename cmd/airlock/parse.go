package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/parse"
)

type parseCandidate struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Version   int             `json:"version"`
	Arguments json.RawMessage `json:"arguments"`
}

type parseFailure struct {
	CallID string       `json:"call_id"`
	Name   string       `json:"name,omitempty"`
	Reason parse.Reason `json:"reason"`
	Detail string       `json:"detail,omitempty"`
}

type parseOutput struct {
	Candidates []parseCandidate `json:"candidates"`
	Failures   []parseFailure   `json:"failures"`
	// FinishReason is the response's own; Incomplete is set (truncated, abnormal_finish,
	// refusal, provider_error, unread_part) when the message did not end normally or holds a
	// part Airlock refuses, calls or not: its prose is no finished answer. IncompleteDetail
	// says why (escaped).
	FinishReason     string       `json:"finish_reason"`
	Incomplete       parse.Reason `json:"incomplete,omitempty"`
	IncompleteDetail string       `json:"incomplete_detail,omitempty"`
}

func newParseCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "parse [--format openai|anthropic] < response.json",
		Short: "Strictly parse one raw provider response and print its candidates and parse failures",
		Long: `Read one raw provider response (an OpenAI chat.completion body, an Ollama chat body or an
Anthropic message) from stdin and print what Airlock's strict parser makes of it:

  {"candidates":[{"call_id","name","version","arguments"}],
   "failures":[{"call_id","name","reason","detail"}],
   "finish_reason":"…", "incomplete":"truncated|abnormal_finish" (only when it did not end normally)}

Nothing is repaired: empty or missing arguments, invalid or double-encoded JSON, trailing data,
names outside the grammar, duplicate call ids (every call of such a message fails), truncated
output, a message that did not end normally (abnormal_finish: any finish or stop reason other
than tool_calls, stop or function_call for OpenAI, stop for Ollama, tool_use or end_turn for
Anthropic, including a missing one) and tool calls written as text are failures with a reason
code. Names are not checked against the registry here (the executor
does that at resolve), so version is the one the base registry advertises, or 0. --format
auto (the default) detects the format.
Useful for debugging a model server. Exit status 1 if the input is not a provider response.`,
		Example: `  curl -s $BASE/v1/chat/completions -d @req.json | airlock parse
  airlock parse --format anthropic < message.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<20))
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			f := parse.Format(format)
			switch format {
			case "":
				f = parse.FormatAuto
			case string(parse.FormatOpenAI), string(parse.FormatAnthropic), string(parse.FormatAuto):
			default:
				return fmt.Errorf("--format must be openai, anthropic or auto, not %q", format)
			}
			versions := map[string]int{}
			if reg, err := loadBaseRegistry(); err == nil {
				for _, c := range reg.Catalog(nil, time.Now()) {
					versions[c.Name] = c.Version
				}
			}
			res, err := parse.Parse(f, raw, parse.Options{Versions: versions})
			if err != nil {
				return err
			}
			out := parseOutput{Candidates: []parseCandidate{}, Failures: []parseFailure{}, FinishReason: res.FinishReason, Incomplete: res.Incomplete, IncompleteDetail: res.IncompleteDetail}
			for _, c := range res.Calls {
				if c.Candidate() {
					out.Candidates = append(out.Candidates, parseCandidate{CallID: c.CallID, Name: c.Name, Version: c.Version, Arguments: c.Arguments})
				} else {
					out.Failures = append(out.Failures, parseFailure{CallID: c.CallID, Name: c.Name, Reason: c.Reason, Detail: c.Detail})
				}
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
	cmd.Flags().StringVar(&format, "format", "", "response format: openai (also Ollama), anthropic or auto (default: auto, detect)")
	return cmd
}
