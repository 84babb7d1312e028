package recording_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/recording"
)

// load reads a fixture session (testdata/<corpus>/runs/<session>.json) through the AgentDojo
// adapter.
func load(t *testing.T, corpus, session string) *recording.Session {
	t.Helper()
	s, err := agentdojo.Recorded(agentdojo.SessionLoader("testdata/" + corpus))(session)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Structured calls recorded with id "", without an id key, or several of them in one step are
// all kept, told apart (IDRecorded), and given the ids Airlock's parser assigns; their
// recorded results are found under those ids.
func TestIDlessCallsAreKept(t *testing.T) {
	for _, c := range []struct {
		session  string
		recorded []bool // IDRecorded per call
	}{
		{"my-model/shop/user_task_0/none/none", []bool{true}},
		{"my-model/shop/user_task_1/none/none", []bool{false}},
		{"my-model/shop/user_task_2/none/none", []bool{false, true, false}},
	} {
		s := load(t, "idless", c.session)
		rounds, err := s.Rounds()
		if err != nil {
			t.Fatalf("%s: %v", c.session, err)
		}
		if len(rounds) != 2 || s.Model != "my-model" || s.Name != c.session {
			t.Fatalf("%s: %d rounds, model %q, name %q", c.session, len(rounds), s.Model, s.Name)
		}
		r := rounds[0]
		if len(r.Structured()) != len(c.recorded) || len(r.Results) != len(c.recorded) {
			t.Fatalf("%s: %d served calls, %d results, want %d", c.session, len(r.Structured()), len(r.Results), len(c.recorded))
		}
		for i, call := range r.Assistant.Calls {
			if call.IDRecorded != c.recorded[i] || call.ID != "" || call.Text {
				t.Errorf("%s call %d: %+v", c.session, i, call)
			}
			id := r.WireID(i)
			if want := "airlock-r1-c" + string(rune('0'+i)); id != want {
				t.Errorf("%s call %d: wire id %s, want %s", c.session, i, id, want)
			}
			m := recording.Lookup(rounds, 1, id)
			if len(m) != 1 || m[0].Result.CallIndex != i || m[0].Call.Name != call.Name {
				t.Errorf("%s call %d: lookup %+v", c.session, i, m)
			}
		}
	}
}

// A recording with an assistant message before the user's task, or with a second user
// message, is refused as unsupported with the reason; it is never served in part.
func TestRoundsRefuseExtraExchanges(t *testing.T) {
	for session, why := range map[string]string{
		"my-model/shop/user_task_0/none/none": "precedes the user's task",
		"my-model/shop/user_task_1/none/none": "2 user messages",
	} {
		_, err := load(t, "unsupported", session).Rounds()
		if !errors.Is(err, recording.ErrUnsupported) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: err = %v, want ErrUnsupported (%s)", session, err, why)
		}
	}
	if _, err := (&recording.Session{Messages: []recording.Message{{Role: recording.RoleSystem}}}).Rounds(); !errors.Is(err, recording.ErrUnsupported) {
		t.Errorf("no user message: %v", err)
	}
	bad := &recording.Session{Messages: []recording.Message{{Role: recording.RoleUser}, {Role: recording.RoleTool}}}
	if _, err := bad.Rounds(); !errors.Is(err, recording.ErrMalformed) {
		t.Errorf("tool message without a call: %v", err)
	}
}

// Issue 11 review: an assistant message without calls in the middle of a recording would end
// the turn as answered; it is refused as unsupported instead.
func TestRoundsRefuseAnAnswerBeforeTheRecordingEnds(t *testing.T) {
	s := &recording.Session{Messages: []recording.Message{
		{Role: recording.RoleUser, Content: "pay the bill"},
		{Role: recording.RoleAssistant, Content: "thinking..."},
		{Role: recording.RoleAssistant, Calls: []recording.Call{{Name: "read_file", Args: json.RawMessage(`{}`), ID: "c1", IDRecorded: true}}},
	}}
	if _, err := s.Rounds(); !errors.Is(err, recording.ErrUnsupported) || !strings.Contains(err.Error(), "would end the turn as answered") {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	s.Messages = s.Messages[:2] // the answer as the last message is the recording's own end
	if _, err := s.Rounds(); err != nil {
		t.Fatalf("a final answer: %v", err)
	}
}
