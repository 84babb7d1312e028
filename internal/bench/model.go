package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/internal/recording"
)

// Rounds is the number of inference rounds of a turn; rounds 1..Rounds-1 propose one call.
const Rounds = 4

// Answer is the final text of every turn.
const Answer = "done: v1,v2,v3"

// approvalRound is the round whose call needs a confirmation in the approval variant.
const approvalRound = 2

// toolFor is the tool the model calls in round r of the variant.
func toolFor(variant string, r int) string {
	if variant == VariantApproval && r == approvalRound {
		return ToolLookupConfirmed
	}
	return ToolLookup
}

func callID(r int) string { return fmt.Sprintf("call_%d", r) }

func keyArgs(r int) string { return fmt.Sprintf(`{"key":"k%d"}`, r) }

// SessionName is the recorded session a recorded-class turn of variant replays.
func SessionName(variant string) string { return "bench-" + variant }

// Recorded is the replay provider's loader for the bench sessions (SessionName): the user's
// message, rounds 1–3 each with one lookup call and its result, round 4 the answer.
func Recorded(session string) (*recording.Session, error) {
	variant, ok := strings.CutPrefix(session, "bench-")
	if !ok || (variant != VariantPlain && variant != VariantApproval) {
		return nil, fmt.Errorf("bench: no recorded session %q", session)
	}
	s := &recording.Session{Name: session, Model: "bench-recorded",
		Messages: []recording.Message{{Role: recording.RoleUser, Content: "look up k1, k2 and k3"}}}
	for r := 1; r < Rounds; r++ {
		s.Messages = append(s.Messages,
			recording.Message{Role: recording.RoleAssistant, Calls: []recording.Call{{
				Name: toolFor(variant, r), Args: json.RawMessage(keyArgs(r)), ID: callID(r), IDRecorded: true}}},
			recording.Message{Role: recording.RoleTool, CallIndex: 0, Content: fmt.Sprintf(`{"value":"v%d"}`, r)})
	}
	s.Messages = append(s.Messages, recording.Message{Role: recording.RoleAssistant, Content: Answer})
	return s, nil
}

// completion is the chat.completion body the network model answers round r with.
func completion(variant string, r int) string {
	var msg string
	finish := "tool_calls"
	if r < Rounds {
		args, _ := json.Marshal(keyArgs(r))
		msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`,
			callID(r), toolFor(variant, r), args)
	} else {
		text, _ := json.Marshal(Answer)
		msg = fmt.Sprintf(`{"role":"assistant","content":%s}`, text)
		finish = "stop"
	}
	return fmt.Sprintf(`{"id":"bench-%d","object":"chat.completion","created":1700000000,"model":"bench-network","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
		r, msg, finish)
}

// ModelServer is a real HTTP server on loopback speaking the OpenAI chat-completions API with
// zero latency: it answers round r (one plus the number of assistant messages in the request)
// with the script of its variant.
type ModelServer struct {
	// URL is the API root to configure the OpenAI provider with ("http://127.0.0.1:<port>/v1").
	URL string
	srv *http.Server
}

// StartModelServer listens on a free loopback port and serves the script of variant.
func StartModelServer(variant string) (*ModelServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: model server: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
			return
		}
		round := 1
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				round++
			}
		}
		if round > Rounds {
			http.Error(w, `{"error":{"message":"the script has only 4 rounds"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion(variant, round))
	})
	m := &ModelServer{URL: "http://" + l.Addr().String() + "/v1", srv: &http.Server{Handler: h}}
	go m.srv.Serve(l)
	return m, nil
}

// Close stops the server.
func (m *ModelServer) Close() error { return m.srv.Close() }
