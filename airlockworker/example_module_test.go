package airlockworker

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/airlock-dev/airlock"

// examples/ticketworker is a module of its own whose code imports only the public packages a
// team builds a worker with (airlockworker, registry, client): if it needed anything else, the
// extension API would not be done. Its go.mod points the module at this checkout.
func TestTicketWorkerExampleUsesOnlyThePublicAPI(t *testing.T) {
	dir := filepath.Join("..", "examples", "ticketworker")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatalf("the example is a module of its own: %v", err)
	}
	if !strings.Contains(string(mod), "replace "+module+" => ../..") {
		t.Errorf("go.mod does not replace %s with this checkout:\n%s", module, mod)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example sources: %v", err)
	}
	allowed := map[string]bool{module + "/airlockworker": true, module + "/registry": true, module + "/client": true}
	used := map[string]bool{}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == module || strings.HasPrefix(path, module+"/") {
				used[path] = true
				if !allowed[path] {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
	if !used[module+"/airlockworker"] || !used[module+"/registry"] {
		t.Errorf("the example should run on airlockworker and registry, imports %v", used)
	}
}
