package inference

import "net/http"

// MaxIdleConnsPerProvider is how many idle connections a provider adapter keeps to its
// endpoint's host. net/http keeps 2 by default: with more rounds in flight (a worker runs many
// turns at once), every request past the second would open a new connection, with a TLS
// handshake to a hosted provider, and leave the old one in TIME_WAIT.
const MaxIdleConnsPerProvider = 64

// newHTTPClient is the HTTP client each provider adapter sends through: net/http's default
// transport (proxy from the environment, HTTP/2, its timeouts) keeping up to
// MaxIdleConnsPerProvider idle connections per host. The SDK's request timeout bounds each call.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerProvider
	t.MaxIdleConns = max(t.MaxIdleConns, MaxIdleConnsPerProvider)
	return &http.Client{Transport: t}
}
