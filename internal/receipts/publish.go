package receipts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/redact"
)

// Publish hands a signed checkpoint to where an operator keeps them, so a third party holds
// the log's state independently of Airlock's database (a cut tail shows against it):
//   - an http:// or https:// URL: POSTed as text/plain (the note text); any status other
//     than 2xx is an error naming it;
//   - anything else is a file path: the note is appended to it, notes separated by a blank
//     line (ReadCheckpoints reads them back).
func Publish(ctx context.Context, dest string, note []byte) error {
	if strings.HasPrefix(dest, "http://") || strings.HasPrefix(dest, "https://") {
		// The URL may carry a key (?token=, a password): errors show it masked (the worker
		// logs them at every tick).
		shown, secrets := redact.URL(dest), redact.URLSecrets(dest)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, bytes.NewReader(note))
		if err != nil {
			return redact.Error(fmt.Errorf("receipts: publish to %s: %w", shown, err), secrets...)
		}
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return redact.Error(fmt.Errorf("receipts: publish to %s: %w", shown, err), secrets...)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("receipts: publish to %s: status %s", shown, redact.String(resp.Status, secrets...))
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("receipts: publish to %s: %w", dest, err)
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("receipts: publish to %s: %w", dest, err)
	}
	if _, err := f.Write(append(append([]byte{}, note...), '\n')); err != nil {
		f.Close()
		return fmt.Errorf("receipts: publish to %s: %w", dest, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("receipts: publish to %s: %w", dest, err)
	}
	return f.Close()
}

// ReadCheckpoints splits a file of signed checkpoints (Publish's file form, or one note) into
// its notes: each is text lines, a blank line, then signature lines ("— name sig").
func ReadCheckpoints(b []byte) [][]byte {
	var out [][]byte
	var cur []string
	inSigs := false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, []byte(strings.Join(cur, "\n")+"\n"))
		}
		cur, inSigs = nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case inSigs && strings.HasPrefix(line, "— "):
			cur = append(cur, line)
		case inSigs:
			flush()
			if line != "" {
				cur = append(cur, line)
			}
		case line == "" && len(cur) > 0:
			cur, inSigs = append(cur, line), true
		case line != "":
			cur = append(cur, line)
		}
	}
	flush()
	return out
}
