package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// The backend metrics the exporter serves for every cluster: four series of
// the cluster as a whole and one per node. All are on the run's allow-list.
var (
	clusterSeries = []string{"cluster:cpu_usage_cores:sum", "cluster:memory_usage_bytes:sum",
		"cluster:capacity_cpu_cores:sum", "cluster:capacity_memory_bytes:sum"}
	nodeSeries = "kube_node_status_capacity"
	benchNodes = 3
)

// seriesPerCluster is how many series the exporter serves for each cluster.
var seriesPerCluster = len(clusterSeries) + benchNodes

// historyStep is the resolution of the history the exporter replays.
const historyStep = time.Minute

// exporter serves the clusters' series in the text format. It first replays
// a history: each scrape answers the next historyStep of it, with explicit
// timestamps (which Prometheus keeps and does not mark stale), until it
// reaches its end; from then on each scrape answers the current time.
type exporter struct {
	mu       sync.Mutex
	clusters []string // cluster label values
	next     time.Time
	end      time.Time
	replayed chan struct{} // closed once the history's end was served
	srv      *http.Server
	addr     string
}

func startExporter() (*exporter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &exporter{replayed: make(chan struct{}), addr: ln.Addr().String()}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// replay sets the clusters and the history's span, ending at end.
func (e *exporter) replay(clusters []string, history time.Duration, end time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clusters, e.next, e.end = clusters, end.Add(-history), end
}

func (e *exporter) serve(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	clusters, at := e.clusters, time.Now()
	if len(clusters) > 0 && !e.next.After(e.end) {
		at = e.next
		e.next = e.next.Add(historyStep)
		if e.next.After(e.end) {
			close(e.replayed)
		}
	}
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	var b strings.Builder
	b.Grow(len(clusters) * seriesPerCluster * 110)
	step := at.Unix() / 60
	for _, id := range clusters {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		base := float64(h.Sum32()%64 + 8)
		usage := base * (0.3 + float64((int64(h.Sum32())+step)%50)/100)
		for i, name := range clusterSeries {
			v := []float64{usage, usage * 3.5e9, base, base * 4e9}[i]
			fmt.Fprintf(&b, "%s{clusterID=%q} %g %s\n", name, id, v, ts)
		}
		for n := range benchNodes {
			fmt.Fprintf(&b, "%s{clusterID=%q,node=\"node-%d\",resource=\"cpu\",unit=\"core\"} %g %s\n", nodeSeries, id, n, base/float64(benchNodes), ts)
		}
	}
	_, _ = w.Write([]byte(b.String()))
}

func (e *exporter) stop() { _ = e.srv.Close() }

// promBackend is a Prometheus child process scraping the exporter.
type promBackend struct {
	proc   *childproc.Process
	url    string
	config string
	target string
	window time.Duration
	http   *http.Client
}

// promConfig is the scrape configuration: every second while the history
// is replayed, then every liveScrapeInterval. Prometheus's own series of the scrape (up)
// are written at the current time, so the history's older samples are out
// of order: the window admits them.
func promConfig(target string, interval, window time.Duration) string {
	return fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
storage:
  tsdb:
    out_of_order_time_window: %s
scrape_configs:
  - job_name: clusters
    honor_labels: true
    honor_timestamps: true
    static_configs:
      - targets: [%q]
`, interval, interval, window, target)
}

// startPrometheus starts binary on a free loopback port with its own data
// directory under dir, scraping target every second and admitting samples
// as old as history.
func startPrometheus(binary, dir, target string, history time.Duration) (*promBackend, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("--prometheus %s: %w (Debian: apt-get install prometheus)", binary, err)
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	p := &promBackend{url: "http://127.0.0.1:" + strconv.Itoa(ports[0]), config: filepath.Join(dir, "prometheus.yml"),
		target: target, window: history + 10*time.Minute, http: &http.Client{Timeout: 30 * time.Second}}
	if err := os.WriteFile(p.config, []byte(promConfig(target, time.Second, p.window)), 0o600); err != nil {
		return nil, err
	}
	p.proc, err = childproc.Start(childproc.Options{Name: "prometheus", LogPath: filepath.Join(dir, "prometheus.log")}, path,
		"--config.file="+p.config, "--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(ports[0]), "--storage.tsdb.retention.time=1d", "--log.level=warn")
	if err != nil {
		return nil, err
	}
	if err := p.proc.WaitReady(time.Minute, func() error {
		resp, err := p.http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready answered %s", resp.Status)
		}
		return nil
	}); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *promBackend) pid() int { return p.proc.Pid() }
func (p *promBackend) stop()    { p.proc.Stop(30 * time.Second) }

// liveScrapeInterval is how often Prometheus scrapes once the history is
// in: the exporter's live samples move no faster.
const liveScrapeInterval = 15 * time.Second

// slowDown reloads the configuration with liveScrapeInterval (SIGHUP),
// returning once Prometheus serves it.
func (p *promBackend) slowDown(ctx context.Context) error {
	if err := os.WriteFile(p.config, []byte(promConfig(p.target, liveScrapeInterval, p.window)), 0o600); err != nil {
		return err
	}
	if err := syscall.Kill(p.pid(), syscall.SIGHUP); err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() error {
		var status struct {
			Data struct {
				YAML string `json:"yaml"`
			} `json:"data"`
		}
		if err := p.getJSON(ctx, "/api/v1/status/config", &status); err != nil {
			return err
		}
		if !strings.Contains(status.Data.YAML, "scrape_interval: 15s") {
			return fmt.Errorf("prometheus has not reloaded its configuration")
		}
		return nil
	})
}

// count evaluates count(expr) at at (now when zero).
func (p *promBackend) count(ctx context.Context, expr string, at time.Time) (int, error) {
	v := url.Values{"query": {"count(" + expr + ")"}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	var ans struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.getJSON(ctx, "/api/v1/query?"+v.Encode(), &ans); err != nil {
		return 0, err
	}
	if len(ans.Data.Result) == 0 {
		return 0, nil
	}
	s, _ := ans.Data.Result[0].Value[1].(string)
	return strconv.Atoi(s)
}

func (p *promBackend) getJSON(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// poll calls check until it succeeds, failing with its last error after d.
func poll(ctx context.Context, d time.Duration, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
