package web

import (
	"encoding/json"

	"github.com/airlock-dev/airlock/internal/approval"
)

// editRequest turns req into an edit carrying the approver's exact arguments.
func editRequest(req *approval.Request, args json.RawMessage) error {
	_ = req
	_ = args
	return formError("Editing is not available in this build: approve or deny.")
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
