package agentdojo

import (
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/registry"
)

// consequential lists, per suite, the tools that change the environment or act outside it
// and so must wait for a human: the evaluation issue's list for banking and workspace, and
// the corpus README's labelling. Tools of suites not listed here are classified by name (see
// Classify).
var consequential = map[string]map[string]bool{
	"banking": set("send_money", "schedule_transaction", "update_scheduled_transaction", "update_password", "update_user_info"),
	"workspace": set("send_email", "delete_email", "create_calendar_event", "cancel_calendar_event",
		"reschedule_calendar_event", "add_calendar_event_participants", "create_file", "append_to_file",
		"delete_file", "share_file"),
}

// externalReads are read-only tools that reach outside the environment: they change nothing
// but can fetch anything (slack get_webpage takes any URL), so they are not automatic.
var externalReads = map[string]map[string]bool{
	"slack": set("get_webpage"),
}

// readOnlyPrefixes mark a tool as read-only by name when its suite has no explicit list.
var readOnlyPrefixes = []string{"get_", "read_", "search_", "list_", "check_"}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Classify returns the registry's side-effect and network class for tool of suite. It is fail
// closed: a tool is read-only only when its name starts with get_, read_, search_, list_ or
// check_ and it is not on the suite's consequential list; everything else is an external write
// that needs a human confirmation. The class never comes from the recording or from
// tools.json, which says nothing about effects.
func Classify(suite, tool string) (registry.SideEffect, registry.Network) {
	if consequential[suite][tool] {
		return registry.SideEffectExternalWrite, registry.NetworkExternal
	}
	for _, p := range readOnlyPrefixes {
		if strings.HasPrefix(tool, p) {
			if externalReads[suite][tool] {
				return registry.SideEffectNone, registry.NetworkExternal
			}
			return registry.SideEffectNone, registry.NetworkLocal
		}
	}
	return registry.SideEffectExternalWrite, registry.NetworkExternal
}

// Consequential reports whether a call of tool in suite needs a human confirmation under
// Classify.
func Consequential(suite, tool string) bool {
	se, net := Classify(suite, tool)
	return se != registry.SideEffectNone || net != registry.NetworkLocal
}

// EnvironmentName is the destination system of a suite's consequential tools.
func EnvironmentName(suite string) string { return "AgentDojo " + suite + " environment (replayed)" }

// LayerOwner is the owner recorded on generated AgentDojo entries.
const LayerOwner = "agentdojo replay (evaluation)"

// Layer generates the registry layer for one suite from its tools.json tools: capability ids
// "agentdojo.<suite>.<tool-with-dashes>", schema/ref "agentdojo:<suite>/<tool>" (bound by
// capabilities.AgentDojoReplay) and the side-effect class from Classify. It works for any
// suite present in tools.json. The embedded layers under registry/layers are this function's
// output for the four published suites; a test keeps them equal.
func Layer(suite string, tools []Tool) (registry.Source, error) {
	if suite == "" || strings.ContainsAny(suite, "./ ") {
		return registry.Source{}, fmt.Errorf("agentdojo: invalid suite name %q", suite)
	}
	specs := make([]registry.ToolSpec, 0, len(tools))
	for _, t := range tools {
		se, net := Classify(suite, t.Name)
		spec := registry.ToolSpec{Name: t.Name, Description: t.Description, SideEffect: se, Network: net,
			SchemaRef: "agentdojo:" + suite + "/" + t.Name}
		if se != registry.SideEffectNone || net != registry.NetworkLocal {
			// Every argument goes to the suite's environment (replayed here, a real system in
			// the benchmark), so all of them are declared as leaving.
			spec.Destination = &registry.Destination{Kind: registry.DestinationSystem, Name: EnvironmentName(suite),
				Fields: registry.ArgumentFields(t.Parameters)}
		}
		specs = append(specs, spec)
	}
	return registry.GenerateLayer("agentdojo-"+suite, "agentdojo-"+suite+".generated", LayerOwner, "agentdojo."+suite, specs)
}
