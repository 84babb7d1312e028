package registry

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/cedarpolicy"
)

// CedarSuffix is the file name suffix of a Cedar policy source (issue 37).
const CedarSuffix = ".cedar"

// ShadowSuffix is the file name suffix of a candidate Cedar policy run in shadow (issue 37):
// evaluated beside the live policy on every call, its would-be decision recorded, never
// acted on.
const ShadowSuffix = ".shadow.cedar"

// IsCedarSource reports whether src is a live Cedar policy: its name ends in ".cedar" (and
// not ".shadow.cedar").
func IsCedarSource(src Source) bool {
	return strings.HasSuffix(src.Name, CedarSuffix) && !IsShadowSource(src)
}

// IsShadowSource reports whether src is a candidate Cedar policy run in shadow.
func IsShadowSource(src Source) bool { return strings.HasSuffix(src.Name, ShadowSuffix) }

// CedarShadow returns the candidate Cedar policy run in shadow, nil when none is loaded. It
// decides nothing and is not part of any capability's fingerprint: changing it voids no
// approval.
func (r *Registry) CedarShadow() *cedarpolicy.Set { return r.shadow }

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

// ConvertPolicy writes the Cedar policy equivalent to the JSON policy's decisions on caps
// (`airlock policy convert`): automatic is a permit, automatic-when-user-provided a permit
// when every leaving value is the principal's (origin user or both, the JSON rule's reading),
// confirm an @ask rule with the entry's groups and quorum, deny a forbid with its reason.
// Grants and principals stay in the JSON sidecar, which still gates who may call what before
// the Cedar policy decides how; the four-eyes and passkey rules stay there too.
func ConvertPolicy(p *Policy, caps []*Capability) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Converted by airlock policy convert from the JSON authorization policy (revision %s).\n", p.revision)
	b.WriteString("// The JSON sidecar still decides who may call what (grants); this decides how: permit runs\n")
	b.WriteString("// without a human, forbid refuses, no decision asks (@ask rules name groups and quorum).\n")
	seen := map[string]bool{}
	for _, c := range caps {
		if c.IsProposal() || !c.Flags.Dispatchable || c.Status == StatusReserved || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		pe, ok := p.Entry(c.Key())
		id := strconvQuote(c.ID)
		b.WriteString("\n")
		switch {
		case !ok:
			fmt.Fprintf(&b, "// %s has no JSON policy entry: the JSON policy denies it before Cedar is asked.\n", c.Key())
		case pe.Autonomy == AutonomyDeny:
			fmt.Fprintf(&b, "@id(%s)\n@reason(%s)\nforbid (principal, action == Action::%s, resource);\n",
				strconvQuote("deny "+c.ID), strconvQuote("the authorization policy denies "+c.Key()), id)
		case pe.Autonomy == AutonomyAutomatic && c.Automatic():
			fmt.Fprintf(&b, "@id(%s)\npermit (principal, action == Action::%s, resource);\n", strconvQuote("automatic "+c.ID), id)
		case pe.Autonomy == AutonomyAutomaticWhenUserProvided && c.Airlock.SideEffect == SideEffectNone:
			fmt.Fprintf(&b, "@id(%s)\npermit (principal, action == Action::%s, resource)\nwhen { [\"user\", \"both\"].contains(context.destination.origin) };\n",
				strconvQuote("user-provided "+c.ID), id)
		default:
			fmt.Fprintf(&b, "@id(%s)\n@ask(%s)\n", strconvQuote("confirm "+c.ID), strconvQuote(c.Key()+" is confirmed by a person"))
			if len(pe.ApproverGroups) > 0 {
				fmt.Fprintf(&b, "@groups(%s)\n", strconvQuote(strings.Join(pe.ApproverGroups, ",")))
			}
			if pe.Quorum > 1 {
				fmt.Fprintf(&b, "@quorum(\"%d\")\n", pe.Quorum)
			}
			fmt.Fprintf(&b, "permit (principal, action == Action::%s, resource);\n", id)
		}
	}
	return b.String()
}

// strconvQuote quotes s as a Cedar string literal (Go's quoting is a subset Cedar reads).
func strconvQuote(s string) string { return strconv.Quote(s) }

// WithCedar returns a copy of r whose live Cedar policy is set (for tools that replay
// recorded calls through a policy, `airlock policy diff`); the capabilities are shared.
func WithCedar(r *Registry, set *cedarpolicy.Set) *Registry {
	cp := *r
	cp.cedar = set
	return &cp
}
