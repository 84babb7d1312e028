package workers

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/mcp"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

var (
	mcpMu     sync.Mutex
	mcpBridge *mcp.Bridge
)

// MCPBridge is the process's MCP bridge (internal/mcp): one session per configured MCP server,
// shared by every registry revision the process loads, so a reload keeps its connections.
func MCPBridge() *mcp.Bridge {
	mcpMu.Lock()
	defer mcpMu.Unlock()
	if mcpBridge == nil {
		mcpBridge = mcp.New(slog.Default())
	}
	return mcpBridge
}

// CloseMCP disconnects every MCP server of the process (stdio servers are stopped); the next
// MCPBridge call starts a new bridge.
func CloseMCP() {
	mcpMu.Lock()
	b := mcpBridge
	mcpBridge = nil
	mcpMu.Unlock()
	if b != nil {
		b.Close()
	}
}

// AuditMCPChanges makes the process's MCP bridge write an audit row to st for every bound tool
// that leaves its pin (definition changed, tool missing), once per tool, pin and kind of drift:
// outcome mcp_definition_changed or mcp_tool_missing, stage resolve, the reason as detail and
// no workflow (it happened to the registry, not to a turn). `airlock audit` lists them. With
// an outbox (a notify file is configured), operators are told too: an mcp_tool_changed
// notice to the channels routed for the capability or for "mcp_tool_changed", once per tool
// and live digest (the delivery id derives from the same key as the audit row).
func AuditMCPChanges(st *store.Store, out *notify.Outbox) {
	MCPBridge().OnChange = func(c mcp.Change) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		key := fmt.Sprintf("mcp/%s/%s/%s/%s", c.Server, c.Tool, c.Pinned, c.Live)
		now := time.Now()
		_, err := st.AppendAudit(ctx, store.AuditEvent{Key: key,
			CapabilityID: c.CapabilityID, Version: c.Version, Outcome: c.Reason, Stage: string(activities.StageResolve),
			Reason: c.Reason, Detail: c.Detail, ArgsDigest: c.Live, At: now})
		if err != nil {
			slog.Default().Warn("MCP tool change not audited", "server", c.Server, "capability", c.CapabilityID, "error", err)
		}
		if out == nil {
			return
		}
		ch := notify.MCPToolChange{Server: c.Server, Tool: c.Tool, Capability: fmt.Sprintf("%s@%d", c.CapabilityID, c.Version),
			Reason: c.Reason, Detail: c.Detail, Pinned: c.Pinned, Live: c.Live}
		if err := out.MCPChanged(ctx, ch, key, c.CapabilityID, now); err != nil {
			slog.Default().Warn("MCP tool change not notified", "server", c.Server, "capability", c.CapabilityID, "error", err)
		}
	}
}

// MCPSettleTimeout bounds how long a registry load waits for the MCP servers it binds to
// finish their first connection attempt (their tools are offered from then on).
var MCPSettleTimeout = 15 * time.Second

// mcpImplementations binds the MCP tool entries of the registry documents among sources to
// the process's bridge, configured from the servers file named by AIRLOCK_MCP_SERVERS (read
// again on every load, so a reload sees its changes). No MCP entry: nothing is read. An MCP
// entry without a servers file, or naming a server the file does not configure, is an error:
// the worker must not serve (fail closed).
func mcpImplementations(sources []registry.Source) ([]registry.Implementation, error) {
	var entries []registry.Entry
	for _, src := range sources {
		es, err := registry.Entries(src)
		if err != nil {
			continue // a policy sidecar, or a document the load will diagnose
		}
		for _, e := range es {
			if e.Airlock.MCP != nil {
				entries = append(entries, e)
			}
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	path := os.Getenv(mcp.EnvServers)
	if path == "" {
		return nil, fmt.Errorf("registry: %d MCP tool entries (%s, …) but no MCP servers file: set %s to the file that says where each server runs (docs/capability-authors.md: MCP servers)",
			len(entries), entries[0].Key(), mcp.EnvServers)
	}
	servers, err := mcp.LoadServers(path)
	if err != nil {
		return nil, err
	}
	b := MCPBridge()
	b.Configure(servers)
	impls, err := b.Implementations(entries)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), MCPSettleTimeout)
	defer cancel()
	b.WaitSettled(ctx)
	return impls, nil
}
