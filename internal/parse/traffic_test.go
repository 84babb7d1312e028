package parse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/traffic"
)

// trafficFormat is the format and framing an entry of the provider-traffic corpus is read with.
func trafficFormat(tb testing.TB, e traffic.Entry) (Format, Framing) {
	tb.Helper()
	shape, err := e.Shape()
	if err != nil {
		tb.Fatal(err)
	}
	switch shape {
	case traffic.ShapeChatJSON, traffic.ShapeOllamaJSON:
		return FormatOpenAI, ""
	case traffic.ShapeChatSSE:
		return FormatOpenAI, FramingSSE
	case traffic.ShapeOllamaNDJSON:
		return FormatOpenAI, FramingNDJSON
	case traffic.ShapeAnthropicJSON:
		return FormatAnthropic, ""
	case traffic.ShapeAnthropicSSE:
		return FormatAnthropic, FramingSSE
	case traffic.ShapeResponsesJSON:
		return FormatResponses, ""
	case traffic.ShapeResponsesSSE:
		return FormatResponses, FramingSSE
	}
	tb.Fatalf("%s: shape %s", e.File, shape)
	return "", ""
}

// readingOf turns a parse into the manifest's terms.
func readingOf(res Result, err error) traffic.Reading {
	if err != nil {
		return traffic.Reading{Err: err}
	}
	r := traffic.Reading{Text: res.Text, FinishReason: res.FinishReason, Refused: string(res.Incomplete), Detail: res.IncompleteDetail}
	for _, c := range res.Calls {
		r.Calls = append(r.Calls, traffic.ReadCall{ID: c.CallID, Assigned: c.IDAssigned, Name: c.Name, Arguments: string(c.Arguments), Reason: string(c.Reason)})
	}
	return r
}

func loadTraffic(tb testing.TB) []traffic.Entry {
	tb.Helper()
	entries, err := traffic.Load(traffic.DefaultDir)
	if err != nil {
		tb.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	return entries
}

// TestProviderTraffic reads every file of ../shared/provider-traffic exactly as its manifest
// says, or refuses it for a reason the manifest accepts (issue 31 item 1).
func TestProviderTraffic(t *testing.T) {
	for _, e := range loadTraffic(t) {
		t.Run(e.File, func(t *testing.T) {
			f, err := os.Open(filepath.Join(traffic.DefaultDir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			format, framing := trafficFormat(t, e)
			res, err := Read(format, framing, f, Options{Round: 1})
			if err != nil && !errors.Is(err, ErrUnrecognized) {
				t.Fatalf("read: %v", err)
			}
			if d := e.Check(readingOf(res, err)); d != nil {
				t.Errorf("%s (%s):\n  %s", e.File, e.Kind, strings.Join(d, "\n  "))
			}
		})
	}
}

var _ = fmt.Sprint
