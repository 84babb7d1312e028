package proposals

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/airlock-dev/airlock/internal/store"
)

// DefaultMaxMemoryBytes bounds the memory document (before and after a change).
const DefaultMaxMemoryBytes = 256 << 10

// LockName is the materializer's lock file inside the memory root.
const LockName = ".airlock-memory.lock"

// Materialization failure reason codes (receipt kind materialization.failed): content-free.
const (
	FailRootInvalid       = "root_invalid"
	FailPathInvalid       = "path_invalid"
	FailSymlink           = "symlink"
	FailPathEscape        = "path_escape"
	FailStaleBase         = "stale_base"
	FailBaseMismatch      = "base_mismatch"
	FailFrontmatter       = "frontmatter_invalid"
	FailFrontmatterChange = "frontmatter_changed"
	FailTooLarge          = "too_large"
	FailLockHeld          = "lock_held"
	FailLockMalformed     = "lock_malformed"
	FailWrite             = "write_failed"
	FailScan              = "scan_failed"
	FailVerify            = "verify_failed"
)

// Failure is a materialization failure with its content-free reason code.
type Failure struct {
	Code string
	err  error
}

func (f *Failure) Error() string {
	if f.err != nil {
		return "proposals: materialize: " + f.Code + ": " + f.err.Error()
	}
	return "proposals: materialize: " + f.Code
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.err }

func fail(code string, err error) error { return &Failure{Code: code, err: err} }

// Memory is the configured memory root: the one directory memory.md may be read from and
// materialized into.
type Memory struct {
	// Root is the memory root (absolute). It must be a real directory, not a symlink.
	Root string
	// MaxBytes bounds the document (DefaultMaxMemoryBytes when 0).
	MaxBytes int64
}

// Source is the memory root's source name: "filesystem:" + Root.
func (m Memory) Source() string { return "filesystem:" + m.Root }

func (m Memory) max() int64 {
	if m.MaxBytes > 0 {
		return m.MaxBytes
	}
	return DefaultMaxMemoryBytes
}

// path checks the root and memory.md (real directory; regular file, no symlink, inside the
// root) and returns the file's path.
func (m Memory) path() (string, error) {
	if m.Root == "" || !filepath.IsAbs(m.Root) {
		return "", fail(FailRootInvalid, errors.New("the memory root is not an absolute path"))
	}
	fi, err := os.Lstat(m.Root)
	if err != nil {
		return "", fail(FailRootInvalid, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return "", fail(FailSymlink, errors.New("the memory root is a symlink"))
	}
	if !fi.IsDir() {
		return "", fail(FailRootInvalid, errors.New("the memory root is not a directory"))
	}
	p := filepath.Join(m.Root, MemoryPath)
	fi, err = os.Lstat(p)
	if err != nil {
		return "", fail(FailPathInvalid, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return "", fail(FailSymlink, errors.New("memory.md is a symlink"))
	}
	if !fi.Mode().IsRegular() {
		return "", fail(FailPathInvalid, errors.New("memory.md is not a regular file"))
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil || filepath.Dir(real) != filepath.Clean(m.Root) {
		return "", fail(FailPathEscape, errors.New("memory.md resolves outside the memory root"))
	}
	return p, nil
}

// FrontmatterID returns the nonempty id of a Markdown document's YAML frontmatter ("---"
// line, YAML, "---" line).
func FrontmatterID(doc []byte) (string, error) {
	s := strings.ReplaceAll(string(doc), "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return "", errors.New("no frontmatter")
	}
	body, _, ok := strings.Cut(s[4:], "\n---\n")
	if !ok {
		if b, found := strings.CutSuffix(s[4:], "\n---"); found {
			body, ok = b, true
		}
	}
	if !ok {
		return "", errors.New("unterminated frontmatter")
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(body), &fm); err != nil {
		return "", errors.New("frontmatter is not YAML")
	}
	id, _ := fm["id"].(string)
	if strings.TrimSpace(id) == "" {
		return "", errors.New("frontmatter has no id")
	}
	return id, nil
}

func (m Memory) version(doc []byte) (store.MemoryVersion, error) {
	docID, err := FrontmatterID(doc)
	if err != nil {
		return store.MemoryVersion{}, fail(FailFrontmatter, err)
	}
	sum := Digest(doc)
	return store.MemoryVersion{VersionID: id("mv", m.Source(), docID, sum), DocumentID: docID, Source: m.Source(), Path: MemoryPath,
		ContentType: MemoryContentType, Size: int64(len(doc)), SHA256: sum, Content: doc}, nil
}

// readBounded reads at most max bytes of p (FailTooLarge past it).
func readBounded(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fail(FailPathInvalid, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fail(FailPathInvalid, err)
	}
	if int64(len(b)) > max {
		return nil, fail(FailTooLarge, errors.New("memory.md is over the size limit"))
	}
	return b, nil
}

// Scan reads memory.md from the root, records it as an immutable version and makes it the
// root's current version (the trusted reader: what is on disk is current). It fails when
// the root or file is unusable (not offered then).
func (m Memory) Scan(ctx context.Context, st *store.Store) (store.MemoryVersion, error) {
	p, err := m.path()
	if err != nil {
		return store.MemoryVersion{}, err
	}
	doc, err := readBounded(p, m.max())
	if err != nil {
		return store.MemoryVersion{}, err
	}
	v, err := m.version(doc)
	if err != nil {
		return store.MemoryVersion{}, err
	}
	cur := ""
	if c, err := st.CurrentMemory(ctx, m.Source()); err == nil {
		cur = c.VersionID
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.MemoryVersion{}, fail(FailScan, err)
	}
	moved, err := st.PutMemoryVersion(ctx, v, cur)
	if err != nil || !moved {
		return store.MemoryVersion{}, fail(FailScan, fmt.Errorf("record the memory version: moved=%v: %w", moved, err))
	}
	return v, nil
}

// Binding is the snapshot binding of version v.
func Binding(v store.MemoryVersion) *MemoryBinding {
	return &MemoryBinding{Source: v.Source, DocumentID: v.DocumentID, Path: v.Path, VersionID: v.VersionID,
		SHA256: v.SHA256, ContentType: v.ContentType, Size: v.Size}
}

// normalize makes proposed text LF-terminated with LF line ends.
func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// Result is what a materialization wrote (the materialized receipt's detail).
type Result struct {
	DocumentID    string `json:"document_id"`
	BaseVersionID string `json:"base_version_id"`
	NewVersionID  string `json:"new_version_id"`
	SHA256        string `json:"sha256"`
	Bytes         int64  `json:"bytes"`
}

// Materialize applies an accepted or edited memory proposal to memory.md. text is the
// proposed text (accept) or the operator's exact replacement (edit). Before writing it checks,
// failing with a *Failure and its code: the current version pointer and the frozen base
// version equal the proposal's binding (no stale request is rebased); the root is a real
// directory and memory.md a regular file inside it (no symlinks); the on-disk bytes are the
// base version's; old and new documents carry frontmatter with the same nonempty id; the
// result fits the size limit. It writes under the root lock (Lock) an owner-only temporary
// file, fsyncs it, renames it over memory.md, fsyncs the directory, then scans the file and
// verifies the new version, the pointer, the byte count and the SHA-256.
func (m Memory) Materialize(ctx context.Context, st *store.Store, b MemoryBinding, operation, text string) (Result, error) {
	if b.Source != m.Source() || b.Path != MemoryPath || b.ContentType != MemoryContentType {
		return Result{}, fail(FailPathInvalid, errors.New("the proposal's binding names another source or path"))
	}
	base, err := st.GetMemoryVersion(ctx, b.VersionID)
	if err != nil || Digest(base.Content) != b.SHA256 || base.Size != int64(len(base.Content)) || base.Size != b.Size ||
		base.Source != b.Source || base.Path != b.Path || base.ContentType != b.ContentType {
		return Result{}, fail(FailBaseMismatch, errors.New("the base version does not match its binding"))
	}
	next, err := m.next(base.Content, b, operation, text)
	if err != nil {
		return Result{}, err
	}
	// A retry after a crash between the rename and the receipt finds the pointer already on
	// exactly this result (the first attempt finished) or memory.md already holding it (the
	// pointer not moved yet): it completes what the first attempt started instead of calling
	// its own change stale.
	cur, err := st.CurrentMemory(ctx, m.Source())
	done := err == nil && cur.DocumentID == b.DocumentID && cur.SHA256 == Digest(next) && cur.VersionID != b.VersionID
	if !done && (err != nil || cur.VersionID != b.VersionID || cur.SHA256 != b.SHA256 || cur.DocumentID != b.DocumentID) {
		return Result{}, fail(FailStaleBase, errors.New("the memory document changed since the proposal"))
	}
	p, err := m.path()
	if err != nil {
		return Result{}, err
	}
	lock, err := AcquireLock(m.Root)
	if err != nil {
		return Result{}, err
	}
	defer lock.Release()
	onDisk, err := readBounded(p, m.max())
	if err != nil {
		return Result{}, err
	}
	switch {
	case done && bytes.Equal(onDisk, next):
		return Result{DocumentID: cur.DocumentID, BaseVersionID: b.VersionID, NewVersionID: cur.VersionID, SHA256: cur.SHA256, Bytes: cur.Size}, nil
	case done:
		return Result{}, fail(FailStaleBase, errors.New("memory.md on disk differs from the version this proposal recorded"))
	case bytes.Equal(onDisk, base.Content):
		if err := writeAtomic(m.Root, p, next); err != nil {
			return Result{}, err
		}
	case !bytes.Equal(onDisk, next): // equal: an earlier attempt renamed, then died
		return Result{}, fail(FailStaleBase, errors.New("memory.md on disk differs from the base version"))
	}
	// Scan the exact configured source, then verify what it recorded.
	nv, err := m.version(next)
	if err != nil {
		return Result{}, fail(FailScan, err)
	}
	disk, err := readBounded(p, m.max())
	if err != nil || !bytes.Equal(disk, next) {
		return Result{}, fail(FailVerify, errors.New("memory.md does not hold the written bytes"))
	}
	moved, err := st.PutMemoryVersion(ctx, nv, b.VersionID)
	if err != nil || !moved {
		return Result{}, fail(FailScan, fmt.Errorf("record the new version (moved=%v): %w", moved, err))
	}
	after, err := st.CurrentMemory(ctx, m.Source())
	if err != nil || after.VersionID != nv.VersionID || after.SHA256 != Digest(next) || after.Size != int64(len(next)) {
		return Result{}, fail(FailVerify, errors.New("the current version is not the written one"))
	}
	return Result{DocumentID: nv.DocumentID, BaseVersionID: b.VersionID, NewVersionID: nv.VersionID, SHA256: nv.SHA256, Bytes: nv.Size}, nil
}

// next is the document operation makes of base with text, checked: the frontmatter id stays
// the binding's document id and the result fits the size limit.
func (m Memory) next(base []byte, b MemoryBinding, operation, text string) ([]byte, error) {
	var next []byte
	switch operation {
	case "append":
		s := string(base)
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		next = []byte(s + normalize(text))
	case "replace-document":
		next = []byte(normalize(text))
	default:
		return nil, fail(FailWrite, errors.New("unknown operation"))
	}
	oldID, err := FrontmatterID(base)
	if err != nil {
		return nil, fail(FailFrontmatter, err)
	}
	newID, err := FrontmatterID(next)
	if err != nil {
		return nil, fail(FailFrontmatter, err)
	}
	if newID != oldID || oldID != b.DocumentID {
		return nil, fail(FailFrontmatterChange, errors.New("the frontmatter id would change"))
	}
	if int64(len(next)) > m.max() {
		return nil, fail(FailTooLarge, errors.New("the result is over the size limit"))
	}
	return next, nil
}

// writeAtomic writes data to an owner-only temporary file in dir, fsyncs it, renames it over
// p, enforces mode 0600 and fsyncs dir.
func writeAtomic(dir, p string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".memory-*.tmp")
	if err != nil {
		return fail(FailWrite, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fail(FailWrite, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fail(FailWrite, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(FailWrite, err)
	}
	if err := tmp.Close(); err != nil {
		return fail(FailWrite, err)
	}
	if err := os.Rename(name, p); err != nil {
		return fail(FailWrite, err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		return fail(FailWrite, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fail(FailWrite, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fail(FailWrite, err)
	}
	return nil
}

// LockOwner is the evidence a lock file carries: the owner's boot id, PID, kernel process
// start time (clock ticks since boot, /proc/PID/stat field 22) and a random ownership token.
type LockOwner struct {
	BootID    string `json:"boot_id"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Token     string `json:"token"`
}

// Lock is a held root lock.
type Lock struct {
	path  string
	owner LockOwner
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// processStart returns the start time of pid (field 22 of /proc/PID/stat); ok is false when
// no such process exists.
func processStart(pid int) (uint64, bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, errors.New("unreadable /proc stat")
	}
	v, err := strconv.ParseUint(f[19], 10, 64) // field 22 overall; fields after ")" start at 3
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// CurrentOwner is this process's lock evidence with a fresh random token.
func CurrentOwner() (LockOwner, error) {
	boot, err := bootID()
	if err != nil {
		return LockOwner{}, err
	}
	start, ok, err := processStart(os.Getpid())
	if err != nil || !ok {
		return LockOwner{}, fmt.Errorf("read own process start: %v", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return LockOwner{}, err
	}
	return LockOwner{BootID: boot, PID: os.Getpid(), StartTime: start, Token: hex.EncodeToString(tok)}, nil
}

// alive reports whether the lock's owner still runs: same boot, the PID exists and started
// at the recorded time (a reused PID started later).
func (o LockOwner) alive() (bool, error) {
	boot, err := bootID()
	if err != nil {
		return false, err
	}
	if o.BootID != boot {
		return false, nil
	}
	start, ok, err := processStart(o.PID)
	if err != nil {
		return false, err
	}
	return ok && start == o.StartTime, nil
}

// AcquireLock takes the owner-only root lock of root. A lock left by a dead, rebooted or
// PID-reused owner is reclaimed; a live owner's is FailLockHeld; a malformed, non-regular or
// symlinked lock file is FailLockMalformed (fail closed: never removed).
func AcquireLock(root string) (*Lock, error) {
	p := filepath.Join(root, LockName)
	me, err := CurrentOwner()
	if err != nil {
		return nil, fail(FailLockMalformed, err)
	}
	body, _ := json.Marshal(me)
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			_, werr := f.Write(body)
			serr := f.Sync()
			cerr := f.Close()
			if werr != nil || serr != nil || cerr != nil {
				os.Remove(p)
				return nil, fail(FailWrite, errors.Join(werr, serr, cerr))
			}
			return &Lock{path: p, owner: me}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fail(FailLockMalformed, err)
		}
		old, raw, err := readLock(p)
		if err != nil {
			return nil, err
		}
		live, err := old.alive()
		if err != nil {
			return nil, fail(FailLockMalformed, err)
		}
		if live {
			return nil, fail(FailLockHeld, fmt.Errorf("held by live process %d", old.PID))
		}
		// Reclaim only the exact evidence judged dead: re-read before removing.
		_, again, err := readLock(p)
		if err != nil || !bytes.Equal(again, raw) {
			return nil, fail(FailLockMalformed, errors.New("the lock changed while it was reclaimed"))
		}
		if err := os.Remove(p); err != nil {
			return nil, fail(FailLockMalformed, err)
		}
	}
	return nil, fail(FailLockHeld, errors.New("the lock was taken while it was reclaimed"))
}

func readLock(p string) (LockOwner, []byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return LockOwner{}, nil, fail(FailLockMalformed, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return LockOwner{}, nil, fail(FailLockMalformed, errors.New("the lock is not an owner-only regular file"))
	}
	raw, err := readBounded(p, 4096)
	if err != nil {
		return LockOwner{}, nil, fail(FailLockMalformed, err)
	}
	var o LockOwner
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.BootID == "" || o.PID <= 0 || o.StartTime == 0 || len(o.Token) != 32 {
		return LockOwner{}, nil, fail(FailLockMalformed, errors.New("the lock evidence is malformed"))
	}
	return o, raw, nil
}

// Release removes the lock if it still carries this owner's token; replaced evidence is
// left in place and reported.
func (l *Lock) Release() error {
	o, _, err := readLock(l.path)
	if err != nil {
		return err
	}
	if o.Token != l.owner.Token {
		return fail(FailLockMalformed, errors.New("the lock was replaced while held"))
	}
	return os.Remove(l.path)
}
