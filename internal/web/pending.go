package web

import (
	"encoding/json"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/workflows"
)

// editRequest turns req into an edit carrying the approver's exact arguments: the turn denies
// the proposal (edited_by_approver) and runs these as a new, approver-originated proposal
// that passes the executor's stages again.
func editRequest(req *approval.Request, args json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return formError("The edited arguments must be one JSON object: nothing was sent.")
	}
	req.Decision = workflows.DecisionEdit
	req.Arguments = args
	return nil
}

// setDigest binds req to the argument digest the form displayed: a decision made on a page
// that showed other arguments is refused (approval.StaleError here, stale_digest by the turn).
// A form without one is refused: every form of this page carries it.
func setDigest(req *approval.Request, digest string) error {
	if digest == "" {
		return formError("The form carried no argument digest: nothing was sent (reload the page).")
	}
	req.ArgsDigest = digest
	return nil
}

// formError is a refusal of a form before anything is sent, worded for the approver.
type formError string

func (e formError) Error() string { return string(e) }
