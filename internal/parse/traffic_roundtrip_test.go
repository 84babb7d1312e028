package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/internal/traffic"
)

// TestProviderTrafficStreamedAsSent: every unstreamed body of the corpus that must be read,
// cut into the stream its provider would send for it (pieces of 1, 3 and 17 bytes, cuts inside
// characters included), assembles to a message that reads exactly as the body does: the same
// text, finish reason, calls, ids, arguments and provider state (issue 31: text assembled from
// a stream equals the unstreamed answer, part for part).
func TestProviderTrafficStreamedAsSent(t *testing.T) {
	n := 0
	for _, e := range loadTraffic(t) {
		shape, _ := e.Shape()
		if e.Refused() || (shape != traffic.ShapeChatJSON && shape != traffic.ShapeAnthropicJSON && shape != traffic.ShapeOllamaJSON) {
			continue
		}
		body, err := os.ReadFile(filepath.Join(traffic.DefaultDir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		format, _ := trafficFormat(t, e)
		want, err := Parse(format, body, Options{Round: 1})
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		n++
		for _, piece := range []int{1, 3, 17} {
			t.Run(fmt.Sprintf("%s/%d", e.File, piece), func(t *testing.T) {
				events, err := Disassemble(format, body, piece)
				if err != nil {
					t.Fatal(err)
				}
				framing, asm := FramingSSE, Assembler(nil)
				if shape == traffic.ShapeOllamaJSON {
					framing, asm = FramingNDJSON, NewOllamaAssembler()
				} else if asm, err = NewAssembler(format); err != nil {
					t.Fatal(err)
				}
				var wire bytes.Buffer
				for _, ev := range events {
					if framing == FramingNDJSON {
						// An NDJSON line is one line: a pretty-printed body's values are
						// compacted, as Ollama sends them.
						var c bytes.Buffer
						if err := json.Compact(&c, ev); err != nil {
							t.Fatal(err)
						}
						wire.Write(c.Bytes())
						wire.WriteString("\n")
						continue
					}
					// An event whose data spans lines is sent as one data line per line.
					for _, line := range bytes.Split(ev, []byte("\n")) {
						wire.WriteString("data: ")
						wire.Write(line)
						wire.WriteString("\n")
					}
					wire.WriteString("\n")
				}
				assembled, err := AssembleStream(&wire, framing, asm, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Parse(format, assembled, Options{Round: 1})
				if err != nil {
					t.Fatal(err)
				}
				if got.Text != want.Text || got.FinishReason != want.FinishReason || got.Incomplete != want.Incomplete || len(got.Calls) != len(want.Calls) {
					t.Fatalf("streamed reads as %+v, the body as %+v", got, want)
				}
				if !sameJSON(normal(got.ProviderState), normal(want.ProviderState)) {
					t.Errorf("provider state %s, body's %s", got.ProviderState, want.ProviderState)
				}
				for i := range got.Calls {
					g, w := got.Calls[i], want.Calls[i]
					if !sameJSON(normal(g.ProviderState), normal(w.ProviderState)) {
						t.Errorf("call %d provider state %s, body's %s", i, g.ProviderState, w.ProviderState)
					}
					g.ProviderState, w.ProviderState = nil, nil
					if framing == FramingNDJSON && sameJSON(g.Arguments, w.Arguments) && sameJSON([]byte(g.Raw), []byte(w.Raw)) {
						g.Arguments, g.Raw = w.Arguments, w.Raw // compacted on the line, the same JSON
					}
					if !reflect.DeepEqual(g, w) {
						t.Errorf("call %d streamed %+v, body %+v", i, g, w)
					}
				}
			})
		}
	}
	if n < 8 {
		t.Fatalf("only %d unstreamed answers in the corpus: the corpus is not the one this test was written for", n)
	}
}

func normal(raw []byte) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	return raw
}
