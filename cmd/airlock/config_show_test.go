package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// config show prints a flag's value as given (a home directory is no URL to mask), except the
// database URL, whose password never shows.
func TestConfigShowFlagValues(t *testing.T) {
	saved := cfg // the root's flags write the process's Config: later tests must not inherit them
	t.Cleanup(func() { cfg = saved })
	home := filepath.Join(t.TempDir(), "airlock-home")
	out, err := run(t, "", "--home", home, "--corpus", "/srv/corpus", "--database-url", "postgres://airlock:hunter22@db.internal/airlock", "config", "show")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	line := func(key string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, key+" ") {
				return l
			}
		}
		t.Fatalf("no %s line:\n%s", key, out)
		return ""
	}
	if l := line("home"); !strings.Contains(l, home) || !strings.HasSuffix(l, "flag") {
		t.Errorf("home: %q", l)
	}
	if l := line("corpus"); !strings.Contains(l, "/srv/corpus") || !strings.HasSuffix(l, "flag") {
		t.Errorf("corpus: %q", l)
	}
	if strings.Contains(out, "hunter22") || strings.Contains(out, "not a URL") {
		t.Errorf("config show:\n%s", out)
	}
}
