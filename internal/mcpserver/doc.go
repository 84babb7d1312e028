// Package mcpserver is Airlock's MCP server face (issue 35): `airlock mcp serve` puts agents
// Airlock does not run (Claude Code, Cursor, apps on an agents SDK) behind the executor.
//
// Its tools are the registry's catalog as projected for the connected caller: every
// capability the catalog offers now (Airlock's own, HTTP capabilities, upstream MCP servers'
// tools still pinned by digest) that the authorization policy lets the caller's principal use,
// under the registry's names, descriptions and schemas. A tool the policy refuses the principal
// is neither listed nor callable.
//
// The caller is authenticated: over streamable HTTP by an Airlock bearer token
// (internal/clients: a statement signed by a registered client credential, sent as
// "Authorization: Bearer …"), over stdio by the credential of the process that starts the
// server. Every tools/call is a CallWorkflow (workflows/call.go) on Temporal: resolve,
// validate, policy, confirm, execute at most once through the ledger, record and audit, the
// same code a turn's calls run. An automatic call answers at once; a call that needs a human
// waits on a confirmation the approver page and `airlock pending` show while the request stays
// open with progress notifications; a refusal, denial or expiry is a tool error result that
// says what happened and what to do. A retry of the same call (the same idempotency key in
// _meta "airlock/idempotency-key", or the same progress token in the same session) attaches to
// the same workflow and never runs the call twice. Results are MCP content marked untrusted
// (the envelope a turn's model reads, and _meta "airlock/trust": "untrusted"), structured
// content kept.
package mcpserver
