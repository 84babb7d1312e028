package stack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath is the module path whose go.mod marks the repository root.
const ModulePath = "github.com/airlock-dev/airlock"

// ErrNoRepoRoot is returned by RepoRoot when no directory from the working directory up to the
// filesystem root holds a go.mod declaring ModulePath.
var ErrNoRepoRoot = errors.New("stack: repository root not found (no go.mod for " + ModulePath + " above the working directory)")

// RepoRoot returns the absolute path of the Airlock repository: the nearest directory, walking
// up from the working directory, that contains a go.mod declaring module ModulePath. It fails
// with ErrNoRepoRoot when there is none.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("stack: repo root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(b) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRepoRoot
		}
		dir = parent
	}
}

// modulePath returns the path of the module directive in a go.mod file, or "" if none.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = strings.TrimSpace(rest[:i])
		}
		return strings.Trim(rest, "\"`")
	}
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free when asked. Another process may take
// it before the caller binds it; the window is short enough for tests and local runs.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("stack: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
