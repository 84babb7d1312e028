// Package appapi is Airlock's application HTTP API (issue 32): what a chat backend in any
// language uses to start a turn, follow it, read its result and decide its confirmations,
// without Temporal access, the store or the approver key. Every MAC, token and signing step
// is done here, server-side (internal/approval), exactly as the approver page does it.
//
// Routes (openapi.yaml, served at /v1/openapi.yaml, is the contract and is checked against
// these handlers in the tests):
//
//	POST /v1/turns                                   start a turn (Idempotency-Key header)
//	GET  /v1/conversations/{c}/turns/{seq}           status, pending confirmations, result
//	GET  /v1/conversations/{c}/turns/{seq}/events    AG-UI 1.0 events as SSE (Last-Event-ID)
//	GET  /v1/confirmations                           what the caller may decide
//	POST /v1/confirmations/{id}/decision             approve or deny
//	POST /v1/agui                                    AG-UI 1.0 RunAgentInput (HttpAgent)
//
// Callers authenticate with API keys (Authorization: Bearer <key>; LoadKeys) and are scoped:
// a requester (Caller.Principal) starts turns for its principal and reads only that
// principal's turns; an approver (Caller.Approver) sees and decides only the confirmations its
// approver groups may decide, and never one of a turn it requested itself (four-eyes).
// Failed authentications are rate-limited per client address; event streams are bounded per
// caller and end after an idle period; following a turn costs no store reads while nothing
// changes (PostgreSQL LISTEN/NOTIFY on store.StreamsChannel).
package appapi
