package client

import (
	"bytes"
	"encoding/json"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/workers"
)

const module = "github.com/airlock-dev/airlock"

// TestExportedAPINamesNoInternalType type-checks this package from the compiler's export data
// and walks every exported identifier: constants, variables, functions, types, their exported
// fields and methods, parameters and results, element types, through aliases. It fails when any
// type reachable that way is defined under the module's internal/ (a client app in another
// module could not name it). Types of other modules are not walked.
func TestExportedAPINamesNoInternalType(t *testing.T) {
	pkg, seen := walkExported(t, module+"/client", 10)
	// The walk must see through aliases into the contract: TurnResult reaches Usage, which
	// once was internal/inference.Usage.
	if !seen[types.Unalias(pkg.Scope().Lookup("Usage").Type())] {
		t.Error("Usage was not walked")
	}
}

// The package teams build their own workers with (issue 19, item 1) names no internal type
// either: its options, its functions and everything they reach in package registry.
func TestWorkerExtensionAPINamesNoInternalType(t *testing.T) {
	pkg, seen := walkExported(t, module+"/airlockworker", 5)
	// Run takes registry.Implementation: the walk must have reached into package registry.
	run := pkg.Scope().Lookup("Run").Type().(*types.Signature)
	impl := run.Params().At(run.Params().Len() - 1).Type().(*types.Slice).Elem()
	if !seen[types.Unalias(impl)] {
		t.Error("registry.Implementation was not walked")
	}
}

// walkExported type-checks pkgPath from the compiler's export data and walks every exported
// identifier as TestExportedAPINamesNoInternalType describes, failing on any type under
// internal/; it fails when fewer than min identifiers are exported.
func walkExported(t *testing.T, pkgPath string, min int) (*types.Package, map[types.Type]bool) {
	t.Helper()
	exports := map[string]string{}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", pkgPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	for dec := json.NewDecoder(&out); ; {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	pkg, err := imp.Import(pkgPath)
	if err != nil {
		t.Fatal(err)
	}
	short := pkgPath[strings.LastIndexByte(pkgPath, '/')+1:]
	seen := map[types.Type]bool{}
	var walk func(typ types.Type, via string)
	walk = func(typ types.Type, via string) {
		typ = types.Unalias(typ)
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch tt := typ.(type) {
		case *types.Named:
			obj := tt.Obj()
			if obj.Pkg() == nil {
				return // error, comparable
			}
			path := obj.Pkg().Path()
			if strings.HasPrefix(path, module+"/internal/") || path == module+"/internal" {
				t.Errorf("%s reaches %s.%s, which lives under internal/", via, path, obj.Name())
				return
			}
			if path != module && !strings.HasPrefix(path, module+"/") {
				return // another module's type
			}
			walk(tt.Underlying(), via+" ("+obj.Name()+")")
			for _, ms := range []*types.MethodSet{types.NewMethodSet(tt), types.NewMethodSet(types.NewPointer(tt))} {
				for i := 0; i < ms.Len(); i++ {
					if m := ms.At(i).Obj(); m.Exported() {
						walk(m.Type(), via+"."+m.Name())
					}
				}
			}
		case *types.Struct:
			for i := 0; i < tt.NumFields(); i++ {
				if f := tt.Field(i); f.Exported() {
					walk(f.Type(), via+"."+f.Name())
				}
			}
		case *types.Pointer:
			walk(tt.Elem(), via)
		case *types.Slice:
			walk(tt.Elem(), via)
		case *types.Array:
			walk(tt.Elem(), via)
		case *types.Chan:
			walk(tt.Elem(), via)
		case *types.Map:
			walk(tt.Key(), via)
			walk(tt.Elem(), via)
		case *types.Signature:
			for _, tuple := range []*types.Tuple{tt.Params(), tt.Results()} {
				for i := 0; i < tuple.Len(); i++ {
					walk(tuple.At(i).Type(), via+"()")
				}
			}
		case *types.Interface:
			for i := 0; i < tt.NumMethods(); i++ {
				if m := tt.Method(i); m.Exported() {
					walk(m.Type(), via+"."+m.Name())
				}
			}
		}
	}
	n := 0
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		n++
		walk(obj.Type(), short+"."+name)
	}
	if n < min {
		t.Fatalf("only %d exported identifiers found: the walk did not see the package", n)
	}
	return pkg, seen
}

// The workflow type this package starts is the one workers register.
func TestTurnWorkflowName(t *testing.T) {
	if turnWorkflowName != workers.TurnWorkflowName {
		t.Fatalf("client starts %q, workers register %q", turnWorkflowName, workers.TurnWorkflowName)
	}
}

// The example client app imports nothing of this module but the public client package.
func TestExampleUsesOnlyThePublicPackage(t *testing.T) {
	files, err := filepath.Glob("../examples/client/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example sources: %v", err)
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if (path == module || strings.HasPrefix(path, module+"/")) && path != module+"/client" {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
