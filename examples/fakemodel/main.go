// Command fakemodel is a local fake model server for trying Airlock's providers and streaming
// without an API key: it speaks the Anthropic Messages API (POST /v1/messages) and the OpenAI
// chat-completions API (POST /v1/chat/completions). Its first answer of a turn calls
// system_health with a sentence of text; its next answer is a final answer. Asked to stream,
// it sends the provider's stream of the same answer, one event every -interval, strings cut
// into pieces of -piece bytes (multi-byte characters cut too), as a real model would.
//
//	go run ./examples/fakemodel -addr 127.0.0.1:9100
//	AIRLOCK_ANTHROPIC_BASE_URL=http://127.0.0.1:9100 AIRLOCK_ANTHROPIC_API_KEY=test airlock worker
//	AIRLOCK_OPENAI_BASE_URL=http://127.0.0.1:9100/v1 AIRLOCK_OPENAI_API_KEY=test airlock worker
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/internal/parse"
)

const (
	anthCall   = `{"id":"msg_fake1","type":"message","role":"assistant","model":"fake","content":[{"type":"text","text":"Let me check the system's health."},{"type":"tool_use","id":"toolu_fake1","name":"system_health","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":20}}`
	anthAnswer = `{"id":"msg_fake2","type":"message","role":"assistant","model":"fake","content":[{"type":"text","text":"The health check ran; its result is in the tool output above. Grüße! 😀"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":80,"output_tokens":25}}`
	oaCall     = `{"id":"chatcmpl-fake1","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Let me check the system's health.","tool_calls":[{"id":"call_fake1","type":"function","function":{"name":"system_health","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":20}}`
	oaAnswer   = `{"id":"chatcmpl-fake2","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"The health check ran; its result is in the tool output above. Grüße! 😀"},"finish_reason":"stop"}],"usage":{"prompt_tokens":80,"completion_tokens":25}}`
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9100", "listen address")
	interval := flag.Duration("interval", 20*time.Millisecond, "time between streamed events")
	piece := flag.Int("piece", 4, "bytes of text per streamed piece")
	flag.Parse()
	http.HandleFunc("/v1/messages", func(w http.ResponseWriter, r *http.Request) { serve(w, r, true, *interval, *piece) })
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { serve(w, r, false, *interval, *piece) })
	log.Printf("fake model on http://%s (Anthropic /v1/messages, OpenAI /v1/chat/completions)", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

func serve(w http.ResponseWriter, r *http.Request, anthropic bool, interval time.Duration, piece int) {
	b, err := io.ReadAll(r.Body)
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err != nil || json.Unmarshal(b, &req) != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	answered := false // an assistant message in the context: the call was made, answer now
	for _, m := range req.Messages {
		answered = answered || m.Role == "assistant"
	}
	body := map[[2]bool]string{{true, false}: anthCall, {true, true}: anthAnswer, {false, false}: oaCall, {false, true}: oaAnswer}[[2]bool{anthropic, answered}]
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
		return
	}
	events, err := parse.Disassemble(parse.FormatAuto, []byte(body), piece)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	for _, e := range events {
		if anthropic {
			var ev struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(e, &ev)
			fmt.Fprintf(w, "event: %s\n", ev.Type)
		}
		fmt.Fprintf(w, "data: %s\n\n", e)
		if fl != nil {
			fl.Flush()
		}
		time.Sleep(interval)
	}
	if !anthropic {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}
