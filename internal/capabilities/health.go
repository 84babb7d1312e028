package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

// DefaultProbeTimeout bounds each dependency probe of system.health.
const DefaultProbeTimeout = 2 * time.Second

// errNotConfigured is the error text of a probe that was not configured.
const errNotConfigured = "not configured"

// HealthArgs are the arguments of system.health@1: none. The executor's strict decode
// rejects any field.
type HealthArgs struct{}

// Probe checks one dependency; nil means healthy. It must honour ctx's deadline.
type Probe func(ctx context.Context) error

// HealthConfig configures system.health.
type HealthConfig struct {
	// Temporal and Store probe the Temporal frontend and the store; nil reports
	// {"ok": false, "error": "not configured"}.
	Temporal Probe
	Store    Probe
	// DiskPath is the filesystem whose space is reported; "" means "/".
	DiskPath string
	// ProbeTimeout bounds each probe; <= 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
}

// ProbeResult is one probe's outcome.
type ProbeResult struct {
	// OK is true when the probe returned nil within the timeout.
	OK bool `json:"ok"`
	// Error is the probe's error text ("" when OK; "not configured" for a nil probe).
	Error string `json:"error"`
	// LatencyMS is how long the probe took, in milliseconds (0 when not configured).
	LatencyMS float64 `json:"latency_ms"`
}

// HealthReport is system.health's Output.Data. Host figures come from /proc and statfs;
// a figure that could not be read is zero and its error is listed in Errors.
type HealthReport struct {
	// CheckedAt is when the report was taken (the invocation's Now).
	CheckedAt time.Time `json:"checked_at"`
	// UptimeSeconds is the host's uptime, from /proc/uptime.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Load1m, Load5m and Load15m are the load averages, from /proc/loadavg.
	Load1m  float64 `json:"load_1m"`
	Load5m  float64 `json:"load_5m"`
	Load15m float64 `json:"load_15m"`
	// MemoryTotalBytes and MemoryAvailableBytes are MemTotal and MemAvailable from
	// /proc/meminfo, in bytes.
	MemoryTotalBytes     uint64 `json:"memory_total_bytes"`
	MemoryAvailableBytes uint64 `json:"memory_available_bytes"`
	// DiskPath is the path whose filesystem is reported. DiskTotalBytes is its size,
	// DiskFreeBytes its free space and DiskAvailableBytes the free space usable by
	// unprivileged users, in bytes.
	DiskPath           string `json:"disk_path"`
	DiskTotalBytes     uint64 `json:"disk_total_bytes"`
	DiskFreeBytes      uint64 `json:"disk_free_bytes"`
	DiskAvailableBytes uint64 `json:"disk_available_bytes"`
	// Temporal and Store are the dependency probes.
	Temporal ProbeResult `json:"temporal"`
	Store    ProbeResult `json:"store"`
	// Errors lists host figures that could not be read.
	Errors []string `json:"errors,omitempty"`
}

// procDir is where the host figures are read from.
const procDir = "/proc"

// CheckHealth takes a HealthReport now: it reads the host figures and runs both probes
// concurrently, each bounded by the probe timeout. It never fails; failures are reported in
// the report.
func CheckHealth(ctx context.Context, cfg HealthConfig) HealthReport {
	if cfg.DiskPath == "" {
		cfg.DiskPath = "/"
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	temporal := make(chan ProbeResult, 1)
	store := make(chan ProbeResult, 1)
	go func() { temporal <- runProbe(ctx, cfg.Temporal, cfg.ProbeTimeout) }()
	go func() { store <- runProbe(ctx, cfg.Store, cfg.ProbeTimeout) }()

	r := HealthReport{CheckedAt: time.Now(), DiskPath: cfg.DiskPath}
	note := func(err error) {
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	var err error
	r.UptimeSeconds, err = readUptime(procDir + "/uptime")
	note(err)
	r.Load1m, r.Load5m, r.Load15m, err = readLoadavg(procDir + "/loadavg")
	note(err)
	r.MemoryTotalBytes, r.MemoryAvailableBytes, err = readMeminfo(procDir + "/meminfo")
	note(err)
	r.DiskTotalBytes, r.DiskFreeBytes, r.DiskAvailableBytes, err = diskSpace(cfg.DiskPath)
	note(err)

	r.Temporal, r.Store = <-temporal, <-store
	return r
}

// runProbe calls p with a timeout. A probe that ignores its context is abandoned at the
// timeout (its goroutine finishes on its own); a panicking probe is reported as an error.
func runProbe(ctx context.Context, p Probe, timeout time.Duration) ProbeResult {
	if p == nil {
		return ProbeResult{Error: errNotConfigured}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("probe panicked: %v", v)
			}
		}()
		done <- p(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	res := ProbeResult{OK: err == nil, LatencyMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			res.Error = fmt.Sprintf("timed out after %s", timeout)
		} else {
			res.Error = err.Error()
		}
	}
	return res
}

// SystemHealth binds system.health@1: a local, read-only report of the host (uptime, load,
// memory, disk) and of the Temporal and store probes. Output.Data is the JSON HealthReport
// with checked_at set to inv.Now (or the current time when zero).
func SystemHealth(cfg HealthConfig) registry.Implementation {
	return registry.Typed("system.health", 1, func(ctx context.Context, _ *HealthArgs, inv registry.Invocation) (registry.Output, error) {
		r := CheckHealth(ctx, cfg)
		if !inv.Now.IsZero() {
			r.CheckedAt = inv.Now
		}
		data, err := json.Marshal(r)
		if err != nil {
			return registry.Output{}, fmt.Errorf("capabilities: system.health: encode report: %w", err)
		}
		return registry.Output{Data: data}, nil
	})
}

func readUptime(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("capabilities: read uptime: %w", err)
	}
	return parseUptime(string(b))
}

// parseUptime parses /proc/uptime: "<uptime seconds> <idle seconds>".
func parseUptime(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 1 {
		return 0, fmt.Errorf("capabilities: parse uptime: empty")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("capabilities: parse uptime: %w", err)
	}
	return v, nil
}

func readLoadavg(path string) (l1, l5, l15 float64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("capabilities: read loadavg: %w", err)
	}
	return parseLoadavg(string(b))
}

// parseLoadavg parses /proc/loadavg: "<1m> <5m> <15m> <running>/<total> <last pid>".
func parseLoadavg(s string) (l1, l5, l15 float64, err error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, 0, 0, fmt.Errorf("capabilities: parse loadavg: %d fields", len(f))
	}
	var v [3]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return 0, 0, 0, fmt.Errorf("capabilities: parse loadavg: %w", err)
		}
	}
	return v[0], v[1], v[2], nil
}

func readMeminfo(path string) (total, available uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("capabilities: read meminfo: %w", err)
	}
	return parseMeminfo(string(b))
}

// parseMeminfo returns MemTotal and MemAvailable in bytes from /proc/meminfo lines such as
// "MemTotal:       16318412 kB" (kB there means KiB).
func parseMeminfo(s string) (total, available uint64, err error) {
	var gotTotal, gotAvail bool
	for line := range strings.Lines(s) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, 0, fmt.Errorf("capabilities: parse meminfo %s: no value", key)
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("capabilities: parse meminfo %s: %w", key, err)
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			v *= 1024
		}
		if key == "MemTotal" {
			total, gotTotal = v, true
		} else {
			available, gotAvail = v, true
		}
	}
	if !gotTotal || !gotAvail {
		return total, available, fmt.Errorf("capabilities: parse meminfo: MemTotal or MemAvailable missing")
	}
	return total, available, nil
}
