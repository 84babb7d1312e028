package workers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/mcp"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/store"
)

// A pinned MCP tool that leaves its pin is audited and, with a notify file, owed an
// mcp_tool_changed notice to the routed channels, once per tool and live digest however often
// the bridge reports it (issue 34, item 4).
func TestMCPChangeIsAuditedAndNotifiedOnce(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	path := filepath.Join(dir, "notify.yaml")
	if err := os.WriteFile(path, []byte("channels: [{name: ops, type: webhook}, {name: team, type: webhook}]\n"+
		"routes: [{capabilities: [mcp_tool_changed], channels: [ops]}, {capabilities: [send_email], channels: [team]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := MCPBridge().OnChange
	t.Cleanup(func() { MCPBridge().OnChange = old })
	AuditMCPChanges(st, &notify.Outbox{Store: st, Source: notify.NewSource(path)})
	ch := mcp.Change{Server: "tickets", Tool: "get_ticket", CapabilityID: "mcp.tickets.get-ticket", Version: 1,
		Pinned: "sha256:aa", Live: "sha256:bb", Reason: mcp.ReasonDefinitionChanged, Detail: "description changed"}
	MCPBridge().OnChange(ch)
	MCPBridge().OnChange(ch)
	key := "mcp/tickets/get_ticket/sha256:aa/sha256:bb"
	ds, err := st.ListDeliveries(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Channel != "ops" || ds[0].Kind != notify.KindMCPToolChanged {
		t.Fatalf("outbox: %+v", ds)
	}
	evs, err := st.ListAuditOutcome(context.Background(), mcp.ReasonDefinitionChanged, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit: %v %+v", err, evs)
	}
}
