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
		got, err := a.loadContext(ctx, "conv", tc.limit)
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

// Round 1 of a folded turn sends the model what loadContext reads once the opening is stored,
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
			stored, err := a.loadContext(ctx, conv, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sent, stored) {
				t.Errorf("prior %d, limit %d: sent %s, loadContext reads %s", prior, limit, roles(sent), roles(stored))
			}
			if sent[0].Role != inference.RoleSystem || sent[len(sent)-1].Content != "now" {
				t.Errorf("prior %d, limit %d: sent %+v", prior, limit, sent)
			}
		}
	}
}
