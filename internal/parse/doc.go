// Package parse turns one raw provider response into proposals: candidates
// (call id, name, version, arguments) or parse failures with a reason code. It implements
// RFC-0004's strict, non-corrective parsing: it never repairs JSON, never coerces an empty or
// missing argument string to {}, never unwraps double-encoded arguments, never trims a name,
// and never promotes tool-call-shaped text to a call. Names are not checked against the
// registry here: an unknown or near-miss name is a candidate that resolve rejects unmodified.
package parse
