package parse

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/traffic"
)

// BenchmarkStreamVsBody is the cost of assembling a recorded stream and parsing the body it
// assembles to ("stream") against parsing that same body read whole ("body"), per streamed
// file of the provider-traffic corpus (issue 31). Run with -benchmem:
//
//	go test ./internal/parse -run '^$' -bench StreamVsBody -benchmem
func BenchmarkStreamVsBody(b *testing.B) {
	entries, err := traffic.Load(traffic.DefaultDir)
	if err != nil {
		b.Fatalf("the provider-traffic corpus is required: %v", err)
	}
	for _, e := range entries {
		if !e.Streamed || e.Refused() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(traffic.DefaultDir, e.File))
		if err != nil {
			b.Fatal(err)
		}
		format, framing := trafficFormat(b, e)
		asm := newAssemblerFor(b, format, framing)
		body, err := AssembleStream(bytes.NewReader(data), framing, asm, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(e.File+"/stream", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Read(format, framing, bytes.NewReader(data), Options{Round: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(e.File+"/body", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Parse(format, body, Options{Round: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func newAssemblerFor(tb testing.TB, format Format, framing Framing) Assembler {
	tb.Helper()
	if framing == FramingNDJSON {
		return NewOllamaAssembler()
	}
	a, err := NewAssembler(format)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
