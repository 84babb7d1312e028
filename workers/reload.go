package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

// ServeReportDir is the folder under AIRLOCK_HOME where each worker reports the registry
// revision it serves (one JSON file per worker, replaced atomically on start and every reload).
const ServeReportDir = "workers"

// ServeReport is one worker's report: who it is, the revision it serves and the last refused
// reload. Alive is filled in by ReadServeReports (the process still runs on this host).
type ServeReport struct {
	Worker string `json:"worker"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
	registry.ServeStatus
	Watched []string `json:"watched,omitempty"`
	Alive   bool     `json:"-"`
}

// WriteServeReport records what l serves for this process under home (atomic: a temporary file
// renamed over the old report).
func WriteServeReport(home string, l *registry.Live, watched []string) error {
	dir := filepath.Join(home, ServeReportDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("workers: serve report: %w", err)
	}
	host, _ := os.Hostname()
	pid := os.Getpid()
	rep := ServeReport{Worker: fmt.Sprintf("%s/%d", host, pid), Host: host, PID: pid, ServeStatus: l.Status(), Watched: watched}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("workers: serve report: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", host, pid))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("workers: serve report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("workers: serve report: %w", err)
	}
	return nil
}

// RemoveServeReport deletes this process's report (on a clean stop).
func RemoveServeReport(home string) {
	host, _ := os.Hostname()
	_ = os.Remove(filepath.Join(home, ServeReportDir, fmt.Sprintf("%s-%d.json", host, os.Getpid())))
}

// ReadServeReports lists the worker reports under home, sorted by worker; a report of a
// process on this host that no longer runs has Alive false. A missing folder is no reports.
func ReadServeReports(home string) ([]ServeReport, error) {
	dir := filepath.Join(home, ServeReportDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workers: read serve reports: %w", err)
	}
	host, _ := os.Hostname()
	var out []ServeReport
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r ServeReport
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		r.Alive = r.Host != host || (r.PID > 0 && syscall.Kill(r.PID, 0) == nil)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out, nil
}

// ReloadInterval is how often a worker polls its registry and policy files for a change.
const ReloadInterval = time.Second

// WatchRegistry reloads d's registry until ctx ends: when a watched file changes (polled
// every ReloadInterval) and on every SIGHUP. A new revision is validated in full (documents,
// policy, every implementation bound) and swapped in atomically; a broken one is refused with
// its diagnostic on the log and in the serve report, and the old revision keeps serving. The
// next activity (the next inference request's catalog, the next resolve) uses what is served
// then. home is where the serve report goes ("" for none).
func WatchRegistry(ctx context.Context, d *Deps, home string, log *slog.Logger) error {
	if home != "" {
		if err := WriteServeReport(home, d.Served, d.Watched); err != nil {
			log.Warn("registry serve report", "error", err)
		}
		defer RemoveServeReport(home)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	w := &registry.Watcher{Live: d.Served, Load: d.Reload, Files: d.Watched, Interval: ReloadInterval, Trigger: hup,
		OnReload: func(rev string, changed bool, err error) {
			switch {
			case err != nil:
				log.Error("registry reload refused; the previous revision keeps serving", "revision", rev, "diagnostic", err.Error())
			case changed:
				log.Info("registry reloaded", "revision", rev)
			default:
				log.Info("registry reloaded; revision unchanged", "revision", rev)
			}
			if home != "" {
				if werr := WriteServeReport(home, d.Served, d.Watched); werr != nil {
					log.Warn("registry serve report", "error", werr)
				}
			}
		}}
	// A file edited between the first load and now is not missed: load once more at start.
	w.Prime()
	if len(d.Watched) > 0 {
		if _, err := d.Served.Reload(d.Reload); err != nil {
			log.Error("registry reload refused; the previous revision keeps serving", "diagnostic", err.Error())
		}
	}
	if home != "" {
		_ = WriteServeReport(home, d.Served, d.Watched)
	}
	err := w.Run(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
