package syncset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	sdk "github.com/openshift-online/ocm-sdk-go"
	ocmerrors "github.com/openshift-online/ocm-sdk-go/errors"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// OCMConfig is the syncset-ocm delivery's configuration: how it talks to the
// clusters_mgmt API and to the SSO token endpoint.
type OCMConfig struct {
	// TokenURL is the token endpoint of hubs whose OCM target names none.
	TokenURL string
	// Timeout bounds one API call, the token request it may need included.
	Timeout time.Duration
	// RetryLimit is how often ocm-sdk-go itself retries a call (on 503, 429,
	// a GET's 5xx, a reset connection). 0 leaves retrying to the reconciler
	// queue's backoff; the SDK's waits between retries ignore the context.
	RetryLimit int
	// RetryInterval is the SDK's first wait before a retry, doubled after.
	RetryInterval time.Duration
}

// DefaultOCMConfig returns the syncset-ocm defaults: Red Hat SSO's token
// endpoint, and no SDK retries.
func DefaultOCMConfig() OCMConfig {
	return OCMConfig{TokenURL: sdk.DefaultTokenURL, Timeout: 30 * time.Second, RetryLimit: 0, RetryInterval: time.Second}
}

// AddFlags binds the configuration to flags.
func (c *OCMConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.TokenURL, "ocm-token-url", c.TokenURL, "SSO token endpoint of syncset-ocm hubs whose ocm.token_url is empty")
	fs.DurationVar(&c.Timeout, "ocm-timeout", c.Timeout, "timeout of one OCM API call, its token request included")
	fs.IntVar(&c.RetryLimit, "ocm-retry-limit", c.RetryLimit, "retries of one OCM API call by ocm-sdk-go (0: the reconciler's backoff retries)")
	fs.DurationVar(&c.RetryInterval, "ocm-retry-interval", c.RetryInterval, "ocm-sdk-go's first wait before a retry, doubled for each further one")
}

// Validate reports every invalid setting, naming its flag.
func (c OCMConfig) Validate() error {
	var p config.Problems
	if u, err := url.Parse(c.TokenURL); err != nil || u.Host == "" || u.User != nil ||
		!(u.Scheme == "https" || u.Scheme == "http" && fleet.LoopbackHost(u.Hostname())) {
		p.Addf("ocm-token-url", "must be an https:// URL, or http:// to a loopback host (got %q)", c.TokenURL)
	}
	if c.Timeout < time.Second || c.Timeout > 10*time.Minute {
		p.Addf("ocm-timeout", "must be between 1s and 10m (got %s)", c.Timeout)
	}
	if c.RetryLimit < 0 || c.RetryLimit > 5 {
		p.Addf("ocm-retry-limit", "must be between 0 and 5 (got %d)", c.RetryLimit)
	}
	if c.RetryInterval < time.Millisecond || c.RetryInterval > time.Minute {
		p.Addf("ocm-retry-interval", "must be between 1ms and 1m (got %s)", c.RetryInterval)
	}
	return p.Err()
}

// ocmConn is a hub's connection, built for key (API URL, token URL and a hash
// of the credentials); a retired one is closed when its last user is done.
type ocmConn struct {
	key     string
	conn    *sdk.Connection
	users   int
	retired bool
}

// ocmCredentials are a hub's OCM credentials: an OAuth client, or an
// offline token.
type ocmCredentials struct{ clientID, clientSecret, offlineToken string }

// ocmSession is one Deliver's or Withdraw's use of a hub's connection.
type ocmSession struct {
	d        *OCMDelivery
	hubID    string
	target   fleet.OCMTarget
	tokenURL string
	creds    ocmCredentials
	key      string
	conn     *ocmConn
}

// open reads hub's target and credentials and takes its connection.
func (d *OCMDelivery) open(ctx context.Context, hub fleet.Hub) (*ocmSession, error) {
	if hub.OCM == nil {
		return nil, ocmInvalidf("hub %s has no OCM target (ocm.cluster_id and api_url)", hub.Name)
	}
	raw, err := d.src.HubCredentials(ctx, hub.ID)
	if err != nil {
		return nil, fmt.Errorf("HubCredentials(%s): %w", hub.ID, err)
	}
	creds := ocmCredentials{clientID: raw[fleet.CredentialOCMClientID], clientSecret: raw[fleet.CredentialOCMClientSecret],
		offlineToken: raw[fleet.CredentialOCMOfflineToken]}
	if (creds.clientID == "" || creds.clientSecret == "") && creds.offlineToken == "" {
		return nil, ocmInvalidf("hub %s has neither %s and %s nor %s credentials", hub.Name,
			fleet.CredentialOCMClientID, fleet.CredentialOCMClientSecret, fleet.CredentialOCMOfflineToken)
	}
	s := &ocmSession{d: d, hubID: hub.ID, target: *hub.OCM, tokenURL: hub.OCM.TokenURL, creds: creds}
	if s.tokenURL == "" {
		s.tokenURL = d.cfg.TokenURL
	}
	sum := sha256.Sum256([]byte(s.target.APIURL + "\x00" + s.tokenURL + "\x00" + creds.clientID + "\x00" +
		creds.clientSecret + "\x00" + creds.offlineToken))
	s.key = hex.EncodeToString(sum[:])
	if s.conn, err = d.acquire(s); err != nil {
		return nil, err
	}
	return s, nil
}

// close gives the session's connection back.
func (s *ocmSession) close() { s.d.release(s.conn) }

// acquire returns the hub's connection for s.key, building it on first use
// and whenever the key changes (the old one is retired).
func (d *OCMDelivery) acquire(s *ocmSession) (*ocmConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the syncset-ocm delivery is closed")
	}
	c := d.conns[s.hubID]
	if c != nil && c.key == s.key {
		c.users++
		return c, nil
	}
	if c != nil {
		delete(d.conns, s.hubID)
		if err := d.retire(c); err != nil {
			d.logger.Warn("closing an OCM connection", "hub", s.hubID, "error", err)
		}
	}
	conn, err := d.build(s)
	if err != nil {
		return nil, ocmInvalidf("cannot use the OCM target or credentials of hub %s: %v", s.hubID, err)
	}
	c = &ocmConn{key: s.key, conn: conn, users: 1}
	d.conns[s.hubID] = c
	return c, nil
}

// release ends a use of c, closing it when it is retired and unused.
func (d *OCMDelivery) release(c *ocmConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.users--
	if c.retired && c.users == 0 {
		if err := c.conn.Close(); err != nil {
			d.logger.Warn("closing an OCM connection", "error", err)
		}
	}
}

// retire marks c for closing, and closes it now if unused; d.mu is held.
func (d *OCMDelivery) retire(c *ocmConn) error {
	c.retired = true
	if c.users == 0 {
		return c.conn.Close()
	}
	return nil
}

// renew drops the session's connection (when still the hub's) and takes a
// new one, which requests new tokens.
func (s *ocmSession) renew() error {
	s.d.mu.Lock()
	if s.d.conns[s.hubID] == s.conn {
		delete(s.d.conns, s.hubID)
		s.conn.retired = true
	}
	s.d.mu.Unlock()
	s.d.release(s.conn)
	c, err := s.d.acquire(s)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

// build builds a hub's connection. The SDK gets the tokens when the first
// call needs them: client credentials grant, or refresh grant of the offline
// token; its debug log stays off, as it dumps request bodies.
func (d *OCMDelivery) build(s *ocmSession) (*sdk.Connection, error) {
	tokenURL, err := url.Parse(s.tokenURL)
	if err != nil {
		return nil, fmt.Errorf("token URL: %w", err)
	}
	b := sdk.NewConnectionBuilder().
		Logger(ocmSDKLogger{logger: d.logger.With("hub", s.hubID)}).
		URL(s.target.APIURL).
		TokenURL(s.tokenURL).
		Agent("fleet-manager " + sdk.DefaultAgent).
		RetryLimit(d.cfg.RetryLimit).
		RetryInterval(d.cfg.RetryInterval).
		TransportWrapper(func(next http.RoundTripper) http.RoundTripper {
			return &ocmObserver{tokenURL: tokenURL, metrics: d.metrics, next: next}
		})
	if s.creds.clientID != "" && s.creds.clientSecret != "" {
		b = b.Client(s.creds.clientID, s.creds.clientSecret)
	} else {
		b = b.Tokens(s.creds.offlineToken)
	}
	return b.Build()
}

// ocmTrace records, for one call, what the transport saw: the token
// endpoint's answer and the API's, which the SDK does not always return.
type ocmTrace struct {
	mu          sync.Mutex
	tokenFailed bool
	tokenStatus int
	apiStatus   int
}

type ocmTraceKey struct{}

// apiError describes a failed call with status (0 when the SDK returned no
// response) and the SDK's err.
func (t *ocmTrace) apiError(op string, status int, err error) *APIError {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := &APIError{Mode: fleet.DeliverySyncSetOCM, Op: op, Status: status, Err: err}
	switch {
	case status == 0 && t.tokenFailed && t.apiStatus == 0:
		e.Op, e.Status = OpToken, t.tokenStatus
	case status == 0:
		e.Status = t.apiStatus // an answer the SDK could not read, such as a proxy's HTML page
	}
	var body *ocmerrors.Error
	switch {
	case errors.As(err, &body) && body.Reason() != "":
		e.Reason = body.Reason()
	case err != nil:
		e.Reason = err.Error()
	default:
		e.Reason = http.StatusText(status)
	}
	if e.Err == nil {
		e.Err = errors.New(e.Reason)
	}
	return e
}

// ocmObserver sees each request the SDK sends, token requests included: it
// counts the token requests and records the answers in the call's trace.
type ocmObserver struct {
	tokenURL *url.URL
	metrics  *Metrics
	next     http.RoundTripper
}

func (o *ocmObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	token := req.URL.Host == o.tokenURL.Host && req.URL.Path == o.tokenURL.Path
	if token {
		o.metrics.Call(fleet.DeliverySyncSetOCM, OpToken, OutcomeOf(status))
	}
	if t, ok := req.Context().Value(ocmTraceKey{}).(*ocmTrace); ok {
		t.mu.Lock()
		if token {
			t.tokenFailed, t.tokenStatus = status != http.StatusOK, status
		} else {
			t.apiStatus = status
		}
		t.mu.Unlock()
	}
	return resp, err
}

// ocmSDKLogger writes ocm-sdk-go's log to slog. Debug stays off: the SDK's
// debug log dumps requests, and SyncSets hold import credentials.
type ocmSDKLogger struct{ logger *slog.Logger }

func (l ocmSDKLogger) DebugEnabled() bool { return false }
func (l ocmSDKLogger) InfoEnabled() bool {
	return l.logger.Enabled(context.Background(), slog.LevelInfo)
}
func (l ocmSDKLogger) WarnEnabled() bool {
	return l.logger.Enabled(context.Background(), slog.LevelWarn)
}
func (l ocmSDKLogger) ErrorEnabled() bool {
	return l.logger.Enabled(context.Background(), slog.LevelError)
}

func (l ocmSDKLogger) Debug(context.Context, string, ...any) {}

func (l ocmSDKLogger) Info(ctx context.Context, format string, args ...any) {
	l.logger.InfoContext(ctx, "ocm-sdk-go: "+fmt.Sprintf(format, args...))
}

func (l ocmSDKLogger) Warn(ctx context.Context, format string, args ...any) {
	l.logger.WarnContext(ctx, "ocm-sdk-go: "+fmt.Sprintf(format, args...))
}

func (l ocmSDKLogger) Error(ctx context.Context, format string, args ...any) {
	l.logger.ErrorContext(ctx, "ocm-sdk-go: "+fmt.Sprintf(format, args...))
}

// Fatal logs an error and, unlike the SDK's own loggers, does not exit.
func (l ocmSDKLogger) Fatal(ctx context.Context, format string, args ...any) {
	l.Error(ctx, format, args...)
}
