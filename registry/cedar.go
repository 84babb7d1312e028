package registry

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/cedarpolicy"
)

// CedarSuffix is the file name suffix of a Cedar policy source (issue 37).
const CedarSuffix = ".cedar"

// IsCedarSource reports whether src is a Cedar policy: its name ends in ".cedar".
func IsCedarSource(src Source) bool { return strings.HasSuffix(src.Name, CedarSuffix) }

// Cedar returns the loaded Cedar policy, nil when the registry was loaded without one (the
// JSON policy decides alone).
func (r *Registry) Cedar() *cedarpolicy.Set { return r.cedar }

// ClassOf is the Cedar action group of a capability: local-read (side effect none, network
// local), external-read (side effect none, any other network) or write.
func ClassOf(e Entry) cedarpolicy.Class {
	switch {
	case e.Airlock.SideEffect == SideEffectNone && e.Airlock.Network == NetworkLocal:
		return cedarpolicy.ClassLocalRead
	case e.Airlock.SideEffect == SideEffectNone:
		return cedarpolicy.ClassExternalRead
	}
	return cedarpolicy.ClassWrite
}

// CedarActions are the Cedar actions of caps: one per capability/id (its highest version's
// argument schema), proposal tools and entries that are not dispatchable left out (they never
// reach the policy stage).
func CedarActions(caps []*Capability) ([]cedarpolicy.Action, error) {
	latest := map[string]*Capability{}
	var order []string
	for _, c := range caps {
		if c.IsProposal() || !c.Flags.Dispatchable || c.Status == StatusReserved {
			continue
		}
		if prev, ok := latest[c.ID]; !ok {
			order = append(order, c.ID)
			latest[c.ID] = c
		} else if c.Version > prev.Version {
			latest[c.ID] = c
		}
	}
	out := make([]cedarpolicy.Action, 0, len(order))
	for _, id := range order {
		c := latest[id]
		a, err := cedarpolicy.NewAction(c.ID, ClassOf(c.Entry), c.Schema, c.DestinationOf().Fields)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// CedarSchema is the Cedar schema generated from r (what `airlock policy schema` prints).
func (r *Registry) CedarSchema() (string, error) {
	as, err := CedarActions(r.caps)
	if err != nil {
		return "", err
	}
	return cedarpolicy.Schema(as), nil
}

// compileCedar compiles the Cedar sources (concatenated, in order) against the schema of caps.
func compileCedar(srcs []Source, caps []*Capability) (*cedarpolicy.Set, []Diagnostic) {
	var names []string
	var text bytes.Buffer
	for _, s := range srcs {
		names = append(names, s.Name)
		text.Write(s.Data)
		text.WriteByte('\n')
	}
	name := strings.Join(names, " + ")
	as, err := CedarActions(caps)
	if err != nil {
		return nil, []Diagnostic{{Source: name, Rule: RuleCedarPolicy, Message: err.Error()}}
	}
	set, err := cedarpolicy.Compile(name, text.Bytes(), as)
	if err != nil {
		return nil, []Diagnostic{{Source: name, Rule: RuleCedarPolicy, Message: fmt.Sprintf("%v", err)}}
	}
	return set, nil
}
