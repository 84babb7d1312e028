package registry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

type fetchArgs struct {
	URL string `json:"url" validate:"required,url"`
}

type noArgs struct{}

// Load binds Go implementations to the embedded registry; the catalog is generated from it,
// argument schemas included.
func ExampleLoad() {
	reg, err := registry.Load([]registry.Source{registry.Base(), registry.BasePolicy()}, []registry.Implementation{
		registry.Typed("system.health", 1, func(context.Context, *noArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
		registry.Typed("web.fetch", 1, func(context.Context, *fetchArgs, registry.Invocation) (registry.Output, error) {
			return registry.Output{}, nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range reg.Catalog(nil, time.Now()) {
		e, _ := reg.ByToolName(c.Name)
		fmt.Printf("%s -> %s@%d automatic=%v\n", c.Name, c.CapabilityID, c.Version, e.Automatic())
	}
	// Output:
	// system_health -> system.health@1 automatic=true
	// web_fetch -> web.fetch@1 automatic=false
}
