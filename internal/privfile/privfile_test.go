package privfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "f.json")
	if err := Create(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	before, _ := os.Stat(p)
	if before.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", before.Mode().Perm())
	}
	if d, _ := os.Stat(dir); d.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v, want 0700", d.Mode().Perm())
	}
	if err := Replace(p, ".f-*.json", []byte("three")); err != nil {
		t.Fatal(err)
	}
	now, _ := os.Stat(p)
	if Unchanged(before, now) {
		t.Fatal("a replaced file reads as unchanged")
	}
	if again, _ := os.Stat(p); !Unchanged(now, again) || Unchanged(nil, again) {
		t.Fatal("Unchanged misjudges the same file or a nil before")
	}
	if b, err := ReadOwnerOnly(p); err != nil || string(b) != "three" {
		t.Fatalf("ReadOwnerOnly = %q, %v", b, err)
	}
	os.Chmod(p, 0o644)
	if _, err := ReadOwnerOnly(p); !errors.Is(err, ErrMode) {
		t.Fatalf("a 0644 file: %v, want ErrMode", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("Replace left %d files", len(ents))
	}
}
