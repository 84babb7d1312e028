// Package capabilities holds the real Go capabilities that are bound to entries of the
// capability registry (registry.Implementation): the code stage 5 (execute) runs once a
// candidate has been resolved, validated, policy-checked and, where required, confirmed.
// Nothing here decides whether a call may run; side-effect and network classes come from the
// registry entry, never from these implementations or from the model.
//
//   - web.fetch@1 (WebFetch, Fetcher): an HTTP GET of one public http(s) URL, returned as a
//     structured citation {url, final_url, title, content, retrieved_at}. This is the seed
//     rule of RFC-0004 (seeds/000): web.fetch results are structured citations (source URL,
//     retrieved content, retrieval time) kept apart from the model's prose, and fetched
//     content is untrusted data forever: the page text is returned as data only, and nothing
//     in it is interpreted. Network access is fail-closed: the fetcher refuses non-http(s)
//     URLs, userinfo, any connection to a non-public address that the operator's allow-list
//     (ParseAllowList) does not name, and always any connection to Airlock's own services
//     (ResolveProtected), checked on the address actually dialed, so DNS answers, redirects
//     and rebinding cannot reach them; it bounds redirects, body size and time.
//   - system.health@1 (SystemHealth, CheckHealth): a local, read-only report of host uptime,
//     load, memory and disk read from /proc and statfs, and of the Temporal and store probes.
//
// Failures on the fetched target's side are returned to the model as registry.Output.Error
// (data, not an infrastructure error); callers of Fetcher.Fetch branch on the exported
// sentinel errors with errors.Is.
package capabilities
