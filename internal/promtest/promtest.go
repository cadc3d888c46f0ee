// Package promtest runs a real Prometheus for tests: Debian's `prometheus`
// binary (scripts/dbops/ensure-tools.sh installs it) on a free loopback port,
// with a data folder of its own, scraping every second. Each Start is a
// Prometheus of its own, stopped when the test ends:
//
//	exporter := promtest.NewExporter(t)
//	exporter.Set(`cpu{clusterID="a"} 1` + "\n")
//	prom := promtest.Start(t, promtest.Options{ScrapeConfigs: exporter.ScrapeConfig("exporter")})
//	vector := prom.WaitForSeries(t, `cpu`, 1)
//
// The binary is $PROMETHEUS_BIN, else `prometheus` on the PATH. Promtool is
// $PROMTOOL_BIN, else the one scripts/prometheus/build-promtool.sh builds
// (Debian's has no --http.config.file, so it cannot send a bearer token),
// else `promtool` on the PATH.
package promtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// BinEnv and PromtoolEnv name the environment variables that hold the
// binaries' paths.
const (
	BinEnv      = "PROMETHEUS_BIN"
	PromtoolEnv = "PROMTOOL_BIN"
)

const installScript = "scripts/dbops/ensure-tools.sh"

// startAttempts bounds the retries when another process takes the port
// between FreePorts and the bind.
const startAttempts = 3

// Options say what a Prometheus scrapes and how it runs.
type Options struct {
	// ScrapeConfigs is the YAML list under scrape_configs (items starting
	// with "- job_name: ..."); Exporter.ScrapeConfig writes one.
	ScrapeConfigs string
	// Config, when set, is the whole configuration file instead of the
	// default global section and ScrapeConfigs.
	Config string
	// Args are more command-line flags.
	Args []string
}

// Prometheus is a running Prometheus.
type Prometheus struct {
	proc    *childproc.Process
	dir     string
	url     string
	api     v1.API
	startup time.Duration
}

// Start runs a Prometheus with opts and waits until /-/ready answers; it is
// stopped when the test ends. It fails the test when Prometheus cannot
// start, for instance when the binary is missing; it never skips.
func Start(t testing.TB, opts Options) *Prometheus {
	t.Helper()
	began := time.Now()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{dir: t.TempDir()}
	config := opts.Config
	if config == "" {
		config = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
		if strings.TrimSpace(opts.ScrapeConfigs) != "" {
			config += "scrape_configs:\n" + indent(opts.ScrapeConfigs, "  ")
		}
	}
	configFile := filepath.Join(p.dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := childproc.StartOnFreePorts(startAttempts, 5*time.Second, func() (*childproc.Process, error) {
		err := p.run(bin, configFile, opts.Args)
		return p.proc, err
	}); err != nil {
		t.Fatalf("promtest: %v\nconfiguration:\n%s", err, config)
	}
	t.Cleanup(func() { p.proc.Stop(10 * time.Second) })
	client, err := api.NewClient(api.Config{Address: p.url})
	if err != nil {
		t.Fatal(err)
	}
	p.api = v1.NewAPI(client)
	p.startup = time.Since(began)
	t.Logf("promtest: prometheus at %s ready in %s", p.url, p.startup.Round(time.Millisecond))
	return p
}

// run starts one prometheus process on a free port and waits until it is
// ready.
func (p *Prometheus) run(bin, configFile string, extra []string) error {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return err
	}
	p.url = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	data := filepath.Join(p.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	args := append([]string{
		"--config.file=" + configFile,
		"--storage.tsdb.path=" + data,
		// Nothing a test writes ever ages out while it runs.
		"--storage.tsdb.retention.time=10y",
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--log.level=info",
	}, extra...)
	p.proc, err = childproc.Start(childproc.Options{Name: "prometheus", Dir: p.dir,
		LogPath: filepath.Join(p.dir, "prometheus.log")}, bin, args...)
	if err != nil {
		return err
	}
	return p.proc.WaitReady(60*time.Second, func() error { return probe(p.url + "/-/ready") })
}

// Binary returns the prometheus binary: $PROMETHEUS_BIN or the PATH's.
func Binary() (string, error) { return find(BinEnv, "prometheus") }

// Promtool returns the promtool binary: $PROMTOOL_BIN, else the cached
// build of scripts/prometheus/build-promtool.sh, else the PATH's.
func Promtool() (string, error) {
	if os.Getenv(PromtoolEnv) == "" {
		if built, err := childproc.CachePath("promtool", "promtool"); err == nil {
			if info, err := os.Stat(built); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
				return built, nil
			}
		}
	}
	return find(PromtoolEnv, "promtool")
}

func find(env, name string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("promtest: %s=%s is no executable", env, bin)
		}
		return bin, nil
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("promtest: no %s on the PATH: run %s (it installs Debian's prometheus package; %s chooses another binary)",
			name, installScript, env)
	}
	return bin, nil
}

// URL returns the root of the HTTP API, http://127.0.0.1:<port>, without
// trailing slash.
func (p *Prometheus) URL() string { return p.url }

// API returns a client of the HTTP API.
func (p *Prometheus) API() v1.API { return p.api }

// LogTail returns the last n lines of the log.
func (p *Prometheus) LogTail(n int) string { return p.proc.LogTail(n) }

// Query runs an instant query now and returns its vector; it fails the test
// on an error or an answer of another type.
func (p *Prometheus) Query(t testing.TB, expr string) model.Vector {
	t.Helper()
	v, err := p.query(expr)
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	return v
}

func (p *Prometheus) query(expr string) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	value, _, _, err := p.api.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q: a %s, not a vector", expr, value.Type())
	}
	return vector, nil
}

// waitTimeout bounds WaitForSeries: a scrape target's first samples wait
// for Prometheus's target reload, then its scrape interval.
const waitTimeout = 30 * time.Second

// WaitForSeries polls expr until it returns n series and returns them; it
// fails the test when that does not happen within waitTimeout.
func (p *Prometheus) WaitForSeries(t testing.TB, expr string, n int) model.Vector {
	t.Helper()
	var last model.Vector
	var lastErr error
	gomega.NewWithT(t).Eventually(func() int {
		last, lastErr = p.query(expr)
		return len(last)
	}).WithTimeout(waitTimeout).WithPolling(200*time.Millisecond).Should(gomega.Equal(n),
		func() string {
			return fmt.Sprintf("series of %s; last answer %v, error %v; targets:\n%s\nend of the log:\n%s",
				expr, last, lastErr, p.targets(), p.LogTail(20))
		})
	return last
}

// targets describes the scrape targets' health and last errors, for a
// failure message.
func (p *Prometheus) targets() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.api.Targets(ctx)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	var b strings.Builder
	for _, target := range res.Active {
		fmt.Fprintf(&b, "  %s %s: %s %s\n", target.Labels["job"], target.ScrapeURL, target.Health, target.LastError)
	}
	return b.String()
}

// probe returns nil when GET url answers 200.
func probe(url string) error {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// indent puts prefix before every line of s that is not empty.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
