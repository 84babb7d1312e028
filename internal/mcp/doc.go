// Package mcp bridges MCP servers (Model Context Protocol, over stdio or streamable HTTP) into
// Airlock as capabilities, on the official Go SDK (github.com/modelcontextprotocol/go-sdk),
// issue 19 item 3.
//
// An MCP tool becomes a capability only through a registry entry whose airlock block has an
// "mcp" member (registry.MCP): the server's name, the tool's name and its definition (name,
// title, description, input and output schema, annotations) pinned by digest, as `airlock mcp
// import` wrote it and an operator reviewed it. The registry, never the server, decides the
// side effect, network class, cap, timeout and confirmation: annotations and descriptions are
// a server's untrusted claims and only suggest defaults at import.
//
// At run time the Bridge keeps one session per configured server (Servers, the file named by
// AIRLOCK_MCP_SERVERS) and binds each entry as a registry.Implementation:
//   - the tool is offered (catalog) and admitted (resolve) only while its server is connected
//     and its live definition has the pinned digest (Implementation.Available); a changed or
//     missing tool is refused with a reason operators see in catalog describe, airlock doctor,
//     the audit row of a refused call and the worker log, while the server's other tools
//     keep working; a server that is down makes its tools unavailable, not the turn fail;
//   - arguments are validated at stage 2 against the pinned input schema
//     (registry.MCPArgumentSchema); before each call the tool list is read again (unless
//     verify/max-age allows an older one) and the call is made only if the pin still holds;
//   - results are untrusted data (Result, with provenance mcp://<server>/tools/<tool>);
//   - the execute timeout and cancellation reach the server (notifications/cancelled); a
//     call whose answer is lost (the server died, timed out) returns
//     registry.ErrOutcomeUnknown, so an effectful call is outcome_unknown and never re-run; a
//     call that could not be sent at all (no connection could be opened) is not run
//     (registry.NotRunError, server_down);
//   - a session the server no longer knows (it restarted: HTTP 404, or a 400 whose JSON-RPC
//     error speaks of the session) is reopened, not reported as a server that is down: a new
//     session, a new tool list, the pin checked again, then the call. A call the server
//     answered so was not run, and is sent once more on the new session (a confirmed call
//     keeps its approval); a listing that fails is read once more on a new session.
package mcp
