package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/airlock-dev/airlock/internal/stack"
)

// composeFile is docker/compose.yaml as far as these tests read it.
type composeFile struct {
	Services map[string]struct {
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck *struct {
			Test    any  `yaml:"test"`
			Disable bool `yaml:"disable"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	AirlockEnv map[string]string `yaml:"x-airlock-env"`
}

func readCompose(t *testing.T) (string, composeFile) {
	t.Helper()
	path := filepath.Join("..", "..", "docker", "compose.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return path, c
}

// The compose file is valid for Debian's docker-compose (`config` parses, interpolates and
// validates it against the compose schema; no Docker engine needed).
func TestComposeFileIsValid(t *testing.T) {
	path, _ := readCompose(t)
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose is not installed (apt-get install docker-compose; .ci/run installs it): compose.yaml not validated")
	}
	out, err := exec.Command(bin, "-f", path, "config", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "-f", path, "config", "--services").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(out))); n != 10 {
		t.Fatalf("docker-compose sees %d services, want 10:\n%s", n, out)
	}
}

// compose.yaml has the services, published ports and variables of `make cluster`: each Temporal
// service as its own container with its metrics on the cluster's metrics port, the UI, the
// cluster's number of workers with their /metrics ports, the approver page; every Airlock
// container configured with exactly the variables `airlock cluster up` sets; health checks
// everywhere a process serves.
func TestComposeInStepWithCluster(t *testing.T) {
	_, c := readCompose(t)
	p := stack.DefaultClusterPorts()
	webPort := func() int { _, port, _ := net.SplitHostPort(clusterWebAddr); n, _ := strconv.Atoi(port); return n }()
	want := map[string][]int{ // service → host ports it must publish
		"postgresql":        {5432},
		"temporal-history":  {p.HistoryMetrics},
		"temporal-matching": {p.MatchingMetrics},
		"temporal-frontend": {p.Frontend, p.FrontendHTTP, p.FrontendMetrics},
		"temporal-worker":   {p.WorkerMetrics},
		"temporal-ui":       {p.UI},
		"airlock-web":       {webPort},
		"airlock-init":      nil,
	}
	for _, svc := range stack.ClusterServices {
		if _, ok := want["temporal-"+svc]; !ok {
			t.Errorf("cluster service %s has no temporal-%s in the test's table", svc, svc)
		}
	}
	for n := 1; n <= clusterWorkers; n++ {
		want[fmt.Sprintf("airlock-worker-%d", n)] = []int{clusterWorkerHTTPBase + n - 1}
	}
	for name, ports := range want {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("compose.yaml has no service %s", name)
			continue
		}
		var published []int
		for _, m := range s.Ports {
			parts := strings.Split(m, ":") // 127.0.0.1:HOST:CONTAINER
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s publishes %q: want 127.0.0.1:HOST:CONTAINER (loopback only, like make cluster)", name, m)
				continue
			}
			n, _ := strconv.Atoi(parts[1])
			published = append(published, n)
		}
		slices.Sort(published)
		slices.Sort(ports)
		if !slices.Equal(published, ports) {
			t.Errorf("%s publishes host ports %v, make cluster uses %v", name, published, ports)
		}
		if name != "airlock-init" && (s.Healthcheck == nil || s.Healthcheck.Disable || s.Healthcheck.Test == nil) {
			t.Errorf("%s has no health check", name)
		}
	}
	for name := range c.Services {
		if _, ok := want[name]; !ok {
			t.Errorf("compose.yaml has service %s that make cluster does not run", name)
		}
	}
	var keys []string
	for k := range c.AirlockEnv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wantKeys := slices.Sorted(slices.Values(ClusterAirlockEnv))
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("x-airlock-env sets %v, airlock cluster up sets %v", keys, wantKeys)
	}
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "airlock-") {
			continue
		}
		for _, k := range ClusterAirlockEnv {
			if _, ok := s.Environment[k]; !ok {
				t.Errorf("%s does not set %s", name, k)
			}
		}
		for k, v := range s.Environment {
			if strings.Contains(strings.ToLower(k), "password") || (strings.Contains(v, "://") && strings.Contains(v, ":") && !strings.Contains(v, "${")) && strings.Contains(v, "@") {
				t.Errorf("%s: %s carries a literal secret; take it from the environment (${VAR})", name, k)
			}
		}
	}
}
