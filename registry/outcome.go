package registry

import "errors"

// ErrOutcomeUnknown, wrapped by an Implementation's Invoke error, says the call may have taken
// effect but its result is lost (the request was sent and the connection broke, the deadline
// passed while waiting for the answer, the server died mid-call). The executor records
// outcome_unknown for it, never failed, so nobody takes the effect for not done; an effect is
// never re-run (DESIGN "At most once for effects").
var ErrOutcomeUnknown = errors.New("registry: outcome unknown")
