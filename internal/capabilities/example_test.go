package capabilities_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/airlock-dev/airlock/internal/capabilities"
)

func ExamplePublicAddr() {
	for _, ip := range []string{"8.8.8.8", "10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "2606:4700::1"} {
		fmt.Println(ip, capabilities.PublicAddr(netip.MustParseAddr(ip)))
	}
	// Output:
	// 8.8.8.8 true
	// 10.0.0.1 false
	// 169.254.169.254 false
	// ::ffff:127.0.0.1 false
	// 2606:4700::1 true
}

func ExampleFetcher_Fetch() {
	f := capabilities.NewFetcher(capabilities.FetchConfig{}) // public addresses only
	_, err := f.Fetch(context.Background(), "http://127.0.0.1:8080/admin")
	fmt.Println(errors.Is(err, capabilities.ErrBlockedAddress))
	fmt.Println(err)
	// Output:
	// true
	// web.fetch http://127.0.0.1:8080/admin: capabilities: blocked address: 127.0.0.1:8080 (not public and not in the fetch allow-list)
}
