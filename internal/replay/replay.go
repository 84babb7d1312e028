// Package replay turns a recorded AgentDojo session into a TurnRequest, so that `airlock
// replay`, `make run` and the tests replay sessions the same way: the recorded system and user
// messages, the session the replay provider and replay capabilities serve, the suite's
// capabilities as the turn's scope, and a stop at the first divergence from the recording.
package replay

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// ErrNoCorpus reports that no corpus folder is configured.
var ErrNoCorpus = errors.New("replay: no AgentDojo corpus (set AIRLOCK_CORPUS or --corpus)")

// Session names a trace: trace is either a file under <corpusDir>/runs or a session name
// (that path without ".json"). The session name is returned.
func Session(corpusDir, trace string) (string, error) {
	if corpusDir == "" {
		return "", ErrNoCorpus
	}
	runs, err := filepath.Abs(filepath.Join(corpusDir, "runs"))
	if err != nil {
		return "", err
	}
	st, statErr := os.Stat(trace)
	if statErr != nil && (strings.HasSuffix(trace, ".json") || strings.HasPrefix(trace, ".") || filepath.IsAbs(trace)) {
		return "", fmt.Errorf("replay: trace file %s: %w", trace, statErr)
	}
	if statErr == nil && !st.IsDir() {
		abs, _ := filepath.Abs(trace)
		rel, err := filepath.Rel(runs, abs)
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("replay: trace %s is not under the corpus runs folder %s", trace, runs)
		}
		trace = rel
	}
	return strings.TrimSuffix(filepath.ToSlash(trace), ".json"), nil
}

// Request builds the TurnRequest replaying trace (see Session). The conversation id is
// Principal is the principal of replayed turns (`airlock replay`, `airlock dev`): the client
// credential that starts them must be allowed to speak for it (internal/clients).
const Principal = "replay"

// "replay-" plus the session name with separators replaced.
func Request(corpusDir, trace string) (workflows.TurnRequest, error) {
	var req workflows.TurnRequest
	session, err := Session(corpusDir, trace)
	if err != nil {
		return req, err
	}
	t, err := agentdojo.SessionLoader(corpusDir)(session)
	if err != nil {
		return req, fmt.Errorf("replay: load trace: %w", err)
	}
	layer, err := registry.Layer("agentdojo-" + t.Suite)
	if err != nil {
		return req, fmt.Errorf("replay: suite %s: %w", t.Suite, err)
	}
	entries, err := registry.Entries(layer)
	if err != nil {
		return req, err
	}
	for _, e := range entries {
		req.Scope = append(req.Scope, e.ID)
	}
	req.Conversation = "replay-" + strings.NewReplacer("/", "-", ".", "-").Replace(session)
	req.Principal = Principal
	req.Session = session
	req.SystemPrompt = t.SystemPrompt()
	req.Message = t.UserPrompt()
	req.StopOnDivergence = true
	return req, nil
}
