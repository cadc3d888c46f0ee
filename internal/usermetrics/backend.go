package usermetrics

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// backend is the metrics backend's query API. Its answers are decoded only
// as far as the proxy needs: each series' labels, with its points kept as
// the backend wrote them, since the proxy filters labels and never points.
type backend struct {
	client  *http.Client
	base    string
	timeout time.Duration
	limit   int64
}

// errTooLarge is a backend answer past --user-metrics-max-response-bytes.
var errTooLarge = errors.New("the backend's answer is larger than --user-metrics-max-response-bytes")

// newBackend returns the client of cfg's backend, or nil without one.
func newBackend(cfg Config) (*backend, error) {
	if cfg.BackendURL == "" {
		return nil, nil
	}
	tlsConfig, err := backendTLS(cfg)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.MaxIdleConnsPerHost = 32
	var rt http.RoundTripper = transport
	if cfg.TenantHeader != "" {
		rt = &tenantTransport{next: rt, header: cfg.TenantHeader, tenant: cfg.Tenant}
	}
	if cfg.TokenFile != "" {
		rt = &oauth2.Transport{Source: config.NewFileTokenSource(cfg.TokenFile), Base: rt}
	}
	return &backend{client: &http.Client{Transport: rt}, base: strings.TrimSuffix(cfg.BackendURL, "/"),
		timeout: cfg.BackendTimeout, limit: cfg.MaxResponseBytes}, nil
}

func backendTLS(cfg Config) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--user-metrics-backend-ca-file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--user-metrics-backend-ca-file %s: no PEM certificate", cfg.CAFile)
		}
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--user-metrics-backend-cert-file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// tenantTransport adds the tenant header.
type tenantTransport struct {
	next   http.RoundTripper
	header string
	tenant string
}

func (t *tenantTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.header, t.tenant)
	return t.next.RoundTrip(r)
}

// answer is a backend's answer to a query: the Prometheus HTTP API's
// envelope, its result undecoded.
type answer struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
	ErrorType string   `json:"errorType"`
	Error     string   `json:"error"`
	Warnings  []string `json:"warnings"`
	Infos     []string `json:"infos"`
}

// series is one series of a vector or matrix: its labels, and its points
// (value, values, histogram, histograms) as the backend wrote them.
type series struct {
	Metric     map[string]string `json:"metric"`
	Value      json.RawMessage   `json:"value,omitempty"`
	Values     json.RawMessage   `json:"values,omitempty"`
	Histogram  json.RawMessage   `json:"histogram,omitempty"`
	Histograms json.RawMessage   `json:"histograms,omitempty"`
}

// query runs an instant query.
func (b *backend) query(ctx context.Context, q string, at time.Time, timeout time.Duration) (answer, error) {
	return b.do(ctx, "query", url.Values{"query": {q}, "time": {formatTime(at)}, "timeout": {b.queryTimeout(timeout).String()}})
}

// queryRange runs a range query.
func (b *backend) queryRange(ctx context.Context, q string, start, end time.Time, step, timeout time.Duration) (answer, error) {
	return b.do(ctx, "query_range", url.Values{"query": {q}, "start": {formatTime(start)}, "end": {formatTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}, "timeout": {b.queryTimeout(timeout).String()}})
}

// queryTimeout is the caller's timeout within the configured one.
func (b *backend) queryTimeout(asked time.Duration) time.Duration {
	if asked > 0 && asked < b.timeout {
		return asked
	}
	return b.timeout
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', -1, 64)
}

// do POSTs a form to the API, as Prometheus clients do (an organisation's
// cluster matcher makes long queries), and reads at most b.limit bytes.
func (b *backend) do(ctx context.Context, endpoint string, form url.Values) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/api/v1/"+endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return answer{}, backendError(0, answer{}, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.client.Do(req)
	if err != nil {
		return answer{}, backendError(0, answer{}, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, b.limit+1))
	if err == nil && int64(len(body)) > b.limit {
		err = errTooLarge
	}
	if err != nil {
		return answer{}, backendError(resp.StatusCode, answer{}, err)
	}
	var ans answer
	if err := json.Unmarshal(body, &ans); err != nil {
		return answer{}, backendError(resp.StatusCode, answer{}, fmt.Errorf("the backend answered %d with a body that is not the query API's: %w", resp.StatusCode, err))
	}
	if resp.StatusCode/100 != 2 || ans.Status != "success" {
		return answer{}, backendError(resp.StatusCode, ans, fmt.Errorf("the backend answered %d: %s: %s", resp.StatusCode, ans.ErrorType, ans.Error))
	}
	return ans, nil
}

// labelSets are the label sets a backend's message may quote (of the
// caller's own series, but with labels off the allow-list): they are left
// out of the reason.
var labelSets = regexp.MustCompile(`\{[^{}]*=[^{}]*\}`)

// maxBackendReason bounds the backend's message passed to the caller.
const maxBackendReason = 300

// backendError maps the backend's errors to the catalogue: what the backend
// could not evaluate is the query's fault (400, with the backend's message
// without the label sets it quotes); everything else is an outage (503)
// whose cause is logged, not shown.
func backendError(status int, ans answer, err error) error {
	if errors.Is(err, errTooLarge) {
		return refused("the answer is larger than this deployment allows (--user-metrics-max-response-bytes); narrow the query")
	}
	switch {
	case ans.ErrorType == "bad_data" || ans.ErrorType == "execution":
		msg := labelSets.ReplaceAllString(ans.Error, "{...}")
		if len(msg) > maxBackendReason {
			msg = msg[:maxBackendReason] + "..."
		}
		return wrap(fleet.CodeMetricsBackend, err, "the metrics backend could not evaluate the query: %s", msg)
	case ans.ErrorType == "timeout" || ans.ErrorType == "canceled" || errors.Is(err, context.DeadlineExceeded):
		return wrap(fleet.CodeUnavailable, err, "the metrics backend did not answer within the query's timeout; narrow the query or retry later")
	}
	return wrap(fleet.CodeUnavailable, err, "the metrics backend is unavailable (it answered %d); retry later", status)
}

// wrap is a catalogue error with a message for the caller and its cause kept
// for the log.
func wrap(code fleet.ErrorCode, cause error, format string, args ...any) error {
	return &fleet.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}
