package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/registry"
)

// failingTemporal is a Temporal client whose start fails (startErr) or whose run fails (runErr).
type failingTemporal struct {
	client.Client
	startErr, runErr error
}

func (f failingTemporal) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	return failedRun{id: o.ID, err: f.runErr}, nil
}

type failedRun struct {
	client.WorkflowRun
	id  string
	err error
}

func (r failedRun) GetID() string                  { return r.id }
func (r failedRun) Get(context.Context, any) error { return r.err }

// When Temporal cannot start a call, or the call's workflow fails, the agent gets a tool error
// in words (never a protocol error it cannot read), naming the call's workflow when there is one.
func TestCallFailuresAreToolErrors(t *testing.T) {
	reg := testReg(t)
	for _, tc := range []struct {
		name string
		tc   failingTemporal
		want string
	}{
		{"start fails", failingTemporal{startErr: errors.New("connection refused")}, "could not start this call"},
		{"run fails", failingTemporal{runErr: errors.New("store down")}, "could not finish this test_echo call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Registry: func() *registry.Registry { return reg }, Temporal: tc.tc})
			ct, st := mcp.NewInMemoryTransports()
			cred, err := clients.NewCredential("c")
			if err != nil {
				t.Fatal(err)
			}
			caller := CredentialCaller(cred, "alice")
			if _, err := s.ServeTransport(t.Context(), caller, st); err != nil {
				t.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_echo", Arguments: map[string]any{"text": "x"}})
			if err != nil {
				t.Fatalf("a protocol error: %v", err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !res.IsError || !strings.Contains(text, tc.want) {
				t.Fatalf("result = %+v (%q)", res, text)
			}
		})
	}
}
