package usermetrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// backend is the metrics backend's query API.
type backend struct {
	api     promv1.API
	timeout time.Duration
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
	rt := &backendTransport{next: transport, header: cfg.TenantHeader, tenant: cfg.Tenant,
		token: tokenFile{path: cfg.TokenFile}, limit: cfg.MaxResponseBytes}
	client, err := api.NewClient(api.Config{Address: strings.TrimSuffix(cfg.BackendURL, "/"), RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("--user-metrics-backend-url: %w", err)
	}
	return &backend{api: promv1.NewAPI(client), timeout: cfg.BackendTimeout}, nil
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

// backendTransport adds the tenant header and the token, and bounds the
// answer read.
type backendTransport struct {
	next   http.RoundTripper
	header string
	tenant string
	token  tokenFile
	limit  int64
}

func (t *backendTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.header != "" {
		r.Header.Set(t.header, t.tenant)
	}
	if t.token.path != "" {
		tok, err := t.token.read()
		if err != nil {
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.limit}
	return resp, nil
}

// limitedBody fails with errTooLarge past its limit.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// tokenFile reads a token file again when it changes.
type tokenFile struct {
	path    string
	mu      sync.Mutex
	modTime time.Time
	size    int64
	token   string
}

func (f *tokenFile) read() (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("--user-metrics-backend-token-file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.token != "" && st.ModTime().Equal(f.modTime) && st.Size() == f.size {
		return f.token, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("--user-metrics-backend-token-file: %w", err)
	}
	f.token, f.modTime, f.size = string(bytes.TrimSpace(b)), st.ModTime(), st.Size()
	return f.token, nil
}

// answer is a backend's answer to a query.
type answer struct {
	Value    model.Value
	Warnings []string
	Infos    []string
}

// query runs an instant query.
func (b *backend) query(ctx context.Context, q string, at time.Time, timeout time.Duration) (answer, error) {
	v, warnings, infos, err := b.api.Query(ctx, q, at, promv1.WithTimeout(b.queryTimeout(timeout)))
	return answer{Value: v, Warnings: warnings, Infos: infos}, backendError(err)
}

// queryRange runs a range query.
func (b *backend) queryRange(ctx context.Context, q string, r promv1.Range, timeout time.Duration) (answer, error) {
	v, warnings, infos, err := b.api.QueryRange(ctx, q, r, promv1.WithTimeout(b.queryTimeout(timeout)))
	return answer{Value: v, Warnings: warnings, Infos: infos}, backendError(err)
}

// queryTimeout is the caller's timeout within the configured one.
func (b *backend) queryTimeout(asked time.Duration) time.Duration {
	if asked > 0 && asked < b.timeout {
		return asked
	}
	return b.timeout
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
func backendError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errTooLarge) || strings.Contains(err.Error(), errTooLarge.Error()) {
		return refused("the answer is larger than this deployment allows (--user-metrics-max-response-bytes); narrow the query")
	}
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Type {
		case promv1.ErrBadData, promv1.ErrExec:
			msg := labelSets.ReplaceAllString(apiErr.Msg, "{...}")
			if len(msg) > maxBackendReason {
				msg = msg[:maxBackendReason] + "..."
			}
			return wrap(fleet.CodeMetricsBackend, err, "the metrics backend could not evaluate the query: %s", msg)
		case promv1.ErrTimeout, promv1.ErrCanceled:
			return wrap(fleet.CodeUnavailable, err, "the metrics backend did not answer within the query's timeout; narrow the query or retry later")
		}
	}
	return wrap(fleet.CodeUnavailable, err, "the metrics backend is unavailable; retry later")
}

// wrap is a catalogue error with a message for the caller and its cause kept
// for the log.
func wrap(code fleet.ErrorCode, cause error, format string, args ...any) error {
	return &fleet.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}
