package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/appapi"
)

// TestAppAPIRepeatGrant: the application API's decision route takes a repeat grant (issue 37,
// item 4). bob approves alice's web_fetch with repeat_count 1: the model's identical second
// fetch runs without a confirmation (its outcome names the grant, bob and 0 uses left), the
// third asks again. A grant on a denial, or over its bounds, is refused 400 and sends nothing.
func TestAppAPIRepeatGrant(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	fetch := func(id string) string {
		return calls(call(id, "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL)))
	}
	a := newAPIStack(t, newFakeModel(t, fetch("c1"), fetch("c2"), fetch("c3")))
	conv := fmt.Sprintf("api-grant-%d", time.Now().UnixNano()%100000)
	code, b, _ := a.do("POST", "/v1/turns", "app-alice", map[string]any{"conversation": conv, "message": "read it a few times"}, map[string]string{"Idempotency-Key": "g-1"})
	if code != 201 {
		t.Fatalf("start: %d %s", code, b)
	}
	var turn appapi.Turn
	_ = json.Unmarshal(b, &turn)
	status := strings.TrimSuffix(turn.EventsURL, "/events")
	seen := map[string]bool{}
	next := func() (appapi.Confirmation, appapi.Turn) {
		t.Helper()
		var st appapi.Turn
		var cf appapi.Confirmation
		eventually(t, 60*time.Second, "a new pending confirmation", func() bool {
			_, b, _ := a.do("GET", status, "app-alice", nil, nil)
			st = appapi.Turn{}
			_ = json.Unmarshal(b, &st)
			for _, p := range st.Pending {
				if !seen[p.ID] {
					seen[p.ID], cf = true, p
					return true
				}
			}
			return false
		})
		return cf, st
	}
	cf, _ := next()
	for _, bad := range []map[string]any{
		{"decision": "deny", "reason": "no", "args_digest": cf.ArgsDigest, "repeat_count": 1, "repeat_minutes": 5},
		{"decision": "approve", "args_digest": cf.ArgsDigest, "repeat_count": 1},
		{"decision": "approve", "args_digest": cf.ArgsDigest, "repeat_count": 21, "repeat_minutes": 5},
	} {
		if code, b, _ := a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob", bad, nil); code != 400 {
			t.Fatalf("%v: %d %s", bad, code, b)
		}
	}
	if code, b, _ := a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob",
		map[string]any{"decision": "approve", "args_digest": cf.ArgsDigest, "repeat_count": 1, "repeat_minutes": 5}, nil); code != 200 {
		t.Fatalf("approve with a grant: %d %s", code, b)
	}
	cf3, _ := next()
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d fetches before the third call was held; want the approved one and the granted one", n)
	}
	if code, b, _ := a.do("POST", "/v1/confirmations/"+cf3.ID+"/decision", "ops-bob", map[string]any{"decision": "approve", "args_digest": cf3.ArgsDigest}, nil); code != 200 {
		t.Fatalf("approve the third: %d %s", code, b)
	}
	var st appapi.Turn
	eventually(t, 60*time.Second, "the turn's end", func() bool {
		_, b, _ := a.do("GET", status, "app-alice", nil, nil)
		st = appapi.Turn{}
		_ = json.Unmarshal(b, &st)
		return st.Result != nil
	})
	var got []string
	for _, po := range st.Result.Outcomes {
		g := "-"
		if po.Grant != nil {
			g = fmt.Sprintf("%s/%d", po.Grant.Approver, po.Grant.Remaining)
		}
		got = append(got, string(po.Outcome)+":"+po.Approver+":"+g)
	}
	if strings.Join(got, " ") != "executed:bob:- executed:bob:bob/0 executed:bob:-" || hits.Load() != 3 {
		t.Fatalf("outcomes %v, %d fetches", got, hits.Load())
	}
}
