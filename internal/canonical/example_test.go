package canonical_test

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/canonical"
)

// Key order and whitespace do not change the canonical form; number literals are kept as
// written.
func ExampleCanonicalize() {
	c, _ := canonical.Canonicalize([]byte(`{ "to": "US13…", "amount": 50.0 }`))
	fmt.Println(string(c))
	// Output: {"amount":50.0,"to":"US13…"}
}
