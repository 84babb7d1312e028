package taubench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/internal/agentdojo"
)

type rawTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// LoadTools reads a tau-bench tools file (airline_tools.json): a JSON list of OpenAI tool
// schemas [{"type":"function","function":{"name","description","parameters"}}]. It returns the
// tools in file order as agentdojo.Tool values, so they can sit in the map
// capabilities.AgentDojoReplay takes, under the domain's name. Parameters are kept byte for
// byte as in the file (indentation included).
//
// Errors wrap ErrMalformed (except the read error): a file that is not a non-empty JSON list, an
// entry whose type is not "function" or without a function, a missing or duplicate name, and
// parameters that are not a JSON object.
func LoadTools(path string) ([]agentdojo.Tool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("taubench: read tools: %w", err)
	}
	var raws []rawTool
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, path, err)
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%w: %s: no tools", ErrMalformed, path)
	}
	out := make([]agentdojo.Tool, 0, len(raws))
	seen := make(map[string]bool, len(raws))
	for i, rt := range raws {
		if rt.Type != "function" || rt.Function == nil {
			return nil, fmt.Errorf("%w: %s: tool %d is not {\"type\":\"function\",\"function\":{…}}", ErrMalformed, path, i)
		}
		f := rt.Function
		if f.Name == "" {
			return nil, fmt.Errorf("%w: %s: tool %d has no name", ErrMalformed, path, i)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: %s: duplicate tool %q", ErrMalformed, path, f.Name)
		}
		seen[f.Name] = true
		if p := bytes.TrimSpace(f.Parameters); len(p) == 0 || p[0] != '{' {
			return nil, fmt.Errorf("%w: %s: tool %s: parameters is not a JSON object", ErrMalformed, path, f.Name)
		}
		out = append(out, agentdojo.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
	}
	return out, nil
}

// airlineReadOnly are the airline tools that neither change the booking database nor act
// outside it. They follow tau-bench's naming (get_, list_, search_, plus calculate and think),
// but only these known names are read-only: a new get_ tool is consequential until listed.
var airlineReadOnly = map[string]bool{
	"get_reservation_details": true,
	"get_user_details":        true,
	"list_all_airports":       true,
	"search_direct_flight":    true,
	"search_onestop_flight":   true,
	"calculate":               true,
	"think":                   true,
}

// Consequential reports whether calling tool in domain has consequences: it changes the
// booking database (book_reservation, cancel_reservation, update_reservation_*,
// send_certificate) or acts outside it (transfer_to_human_agents hands the customer to a human).
// These are the calls the airline policy (airline_wiki.md) guards: "Before taking any actions
// that update the booking database (booking, modifying flights, editing baggage, upgrading cabin
// class, or updating passenger information), you must list the action details and obtain
// explicit user confirmation (yes) to proceed." A confirmation check applies to exactly the
// calls for which this returns true.
//
// It fails closed: only the seven known read-only airline tools (get_reservation_details,
// get_user_details, list_all_airports, search_direct_flight, search_onestop_flight, calculate,
// think) are inconsequential; every other name, and every tool of any other domain, is
// consequential.
func Consequential(domain, tool string) bool {
	switch domain {
	case "airline":
		return !airlineReadOnly[tool]
	default:
		return true
	}
}
