package activities

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
)

func contextStore(t *testing.T) *Activities {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Activities{Store: st}
}

func roles(msgs []inference.Message) string {
	s := ""
	for _, m := range msgs {
		s += string(m.Role)[:1]
	}
	return s
}

// A conversation longer than the context window keeps its system prompt leading the window
// (it takes one of the limit places), and the window never starts with a tool result whose
// assistant message fell outside it.
func TestLoadContextKeepsTheSystemPromptOfALongConversation(t *testing.T) {
	a := contextStore(t)
	ctx := context.Background()
	msgs := []inference.Message{{Role: inference.RoleSystem, Content: "you are careful"}}
	for i := range 10 {
		msgs = append(msgs, inference.Message{Role: inference.RoleUser, Content: fmt.Sprint("q", i)},
			inference.Message{Role: inference.RoleAssistant, ToolCalls: []inference.ToolCall{{ID: fmt.Sprint("c", i), Name: "t", Arguments: "{}"}}},
			inference.Message{Role: inference.RoleTool, ToolCallID: fmt.Sprint("c", i), Content: "{}"})
	}
	if err := a.Record(ctx, RecordInput{Conversation: "conv", ContextKey: "k", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit int
		want  string
	}{{4, "suat"}, {5, "suat"}, {6, "satuat"}, {31, "s" + repeat("uat", 10)}, {200, "s" + repeat("uat", 10)}, {1, "s"}} {
		got, _, err := a.loadWindow(ctx, "conv", tc.limit, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := roles(got); r != tc.want || got[0].Content != "you are careful" {
			t.Errorf("limit %d: roles %s, want %s (first %q)", tc.limit, r, tc.want, got[0].Content)
		}
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// Round 1 of a folded turn sends the model what loadWindow reads once the opening is stored,
// for a new conversation, one within the window and one longer than it.
func TestFoldedOpeningSendsWhatLoadContextReads(t *testing.T) {
	for _, prior := range []int{0, 1, 2, 3, 12} {
		for _, limit := range []int{3, 4, 5, 7, 200} {
			a := contextStore(t)
			ctx := context.Background()
			conv := "conv"
			var msgs []inference.Message
			if prior > 0 {
				msgs = append(msgs, inference.Message{Role: inference.RoleSystem, Content: "prompt"})
			}
			for i := range prior {
				msgs = append(msgs, inference.Message{Role: inference.RoleUser, Content: fmt.Sprint("u", i)},
					inference.Message{Role: inference.RoleAssistant, Content: fmt.Sprint("a", i)})
			}
			if len(msgs) > 0 {
				if err := a.Record(ctx, RecordInput{Conversation: conv, ContextKey: "old", Messages: msgs}); err != nil {
					t.Fatal(err)
				}
			}
			in := InferInput{Conversation: conv, ContextLimit: limit, Fold: &InferFold{Opening: true, UserMessage: "now",
				SystemPrompt: "prompt", OpeningKey: "wf/input"}}
			sent, err := a.foldOpening(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			stored, _, err := a.loadWindow(ctx, conv, limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sent, stored) {
				t.Errorf("prior %d, limit %d: sent %s, loadWindow reads %s", prior, limit, roles(sent), roles(stored))
			}
			if sent[0].Role != inference.RoleSystem || sent[len(sent)-1].Content != "now" {
				t.Errorf("prior %d, limit %d: sent %+v", prior, limit, sent)
			}
		}
	}
}

// A round asked again after a crash first deletes what the lost attempt stored from that round
// on (its assistant message, its proposals' outcomes, a later round's answer): the model never
// sees its own lost answer, and no stale entry stays in the conversation. Earlier turns' and
// earlier rounds' entries stay.
func TestFoldedRoundDiscardsWhatALostAttemptStored(t *testing.T) {
	a := contextStore(t)
	ctx := context.Background()
	rec := func(key string, m inference.Message) {
		if err := a.Record(ctx, RecordInput{Conversation: "conv", ContextKey: key, Messages: []inference.Message{m}}); err != nil {
			t.Fatal(err)
		}
	}
	rec("turn/conv/1/r1/assistant", inference.Message{Role: inference.RoleAssistant, Content: "earlier turn"})
	rec("turn/conv/2/input", inference.Message{Role: inference.RoleUser, Content: "now"})
	rec("turn/conv/2/r1/assistant", inference.Message{Role: inference.RoleAssistant, ToolCalls: []inference.ToolCall{{ID: "a0", Name: "t", Arguments: "{}"}}})
	rec("turn/conv/2/p1", inference.Message{Role: inference.RoleTool, ToolCallID: "a0", Content: "{}"})
	// The lost attempt of round 2 (proposals from #2 on).
	rec("turn/conv/2/r2/assistant", inference.Message{Role: inference.RoleAssistant, ToolCalls: []inference.ToolCall{{ID: "lost", Name: "t", Arguments: "{}"}}})
	rec("turn/conv/2/p2", inference.Message{Role: inference.RoleTool, ToolCallID: "lost", Content: "{}"})
	rec("turn/conv/2/r3/assistant", inference.Message{Role: inference.RoleAssistant, Content: "lost answer"})

	in := InferInput{WorkflowID: "turn/conv/2", Round: 2, Conversation: "conv", ContextLimit: 200,
		Fold: &InferFold{AssistantKey: "turn/conv/2/r2/assistant", FirstSeq: 2}}
	msgs, _, err := a.loadWindow(ctx, in.Conversation, in.ContextLimit, in.Fold.unrecorded(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(msgs); got != "auat" {
		t.Fatalf("context roles = %s, want auat (earlier turn, input, round 1, its result)", got)
	}
	stored, err := a.Store.LoadContext(ctx, "conv", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 4 {
		t.Fatalf("stored entries after the round began = %d, want 4 (the lost attempt's 3 deleted)", len(stored))
	}
}
