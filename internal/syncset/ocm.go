package syncset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"time"

	sdk "github.com/openshift-online/ocm-sdk-go"
	cmv1 "github.com/openshift-online/ocm-sdk-go/clustersmgmt/v1"
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
		!(u.Scheme == "https" || u.Scheme == "http" && ocmLoopback(u.Hostname())) {
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

func ocmLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// ocmMaxID is the longest SyncSet id OCM takes.
const ocmMaxID = 50

// OCMDelivery delivers registrations to syncset-ocm hubs: each registration's
// objects go in an external-configuration SyncSet of the hub's cluster in OCM
// (ARCHITECTURE.md section 6), written only when they changed. It keeps one
// ocm-sdk-go connection per hub, which gets and refreshes its tokens. It is a
// fleet.Delivery but no fleet.Releaser: OCM's SyncSet API has no apply mode
// (its SyncSet holds only resources), so there is no documented way to delete
// one and leave its objects on the hub.
type OCMDelivery struct {
	cfg     OCMConfig
	src     Source
	metrics *Metrics
	logger  *slog.Logger

	mu     sync.Mutex
	conns  map[string]*ocmConn // by hub id
	closed bool
}

var _ fleet.Delivery = (*OCMDelivery)(nil)

// ocmConn is a hub's connection, built for key (API URL, token URL and a hash
// of the credentials); a retired one is closed when its last user is done.
type ocmConn struct {
	key     string
	conn    *sdk.Connection
	users   int
	retired bool
}

// NewOCMDelivery returns the syncset-ocm delivery; metrics may be nil. Close
// it to close its connections.
func NewOCMDelivery(cfg OCMConfig, src Source, metrics *Metrics, logger *slog.Logger) *OCMDelivery {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &OCMDelivery{cfg: cfg, src: src, metrics: metrics, logger: logger.With("delivery", fleet.DeliverySyncSetOCM),
		conns: map[string]*ocmConn{}}
}

// Deliver makes reg's SyncSet hold its current objects: it reads the SyncSet,
// creates it when missing and updates it only when its resources differ, so
// an unchanged registration costs one GET.
func (d *OCMDelivery) Deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	start := time.Now()
	report, err := d.deliver(ctx, hub, reg)
	d.metrics.Applied(fleet.DeliverySyncSetOCM, start, err)
	if err != nil {
		return ocmFailed(fmt.Errorf("Deliver(%s): %w", reg.ID, err))
	}
	return report, nil
}

func (d *OCMDelivery) deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	s, err := d.open(ctx, hub)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	defer s.close()
	objects, err := d.src.RegistrationObjects(ctx, hub.ID, reg)
	if err != nil {
		return fleet.DeliveryReport{}, fmt.Errorf("RegistrationObjects: %w", err)
	}
	want, err := ocmResources(objects)
	if err != nil {
		return fleet.DeliveryReport{}, ocmInvalidf("registration %s: %v", reg.ID, err)
	}
	id := fleet.SyncSetName(reg)
	if len(id) > ocmMaxID {
		return fleet.DeliveryReport{}, ocmInvalidf("SyncSet id %s is longer than OCM's %d characters", id, ocmMaxID)
	}
	done, err := s.apply(ctx, id, want)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	if done != "unchanged" {
		d.logger.Info("SyncSet "+done, "hub", hub.ID, "registration", reg.ID, "syncset", id, "objects", len(want))
	}
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonSyncSetApplied, NoAgent: true,
		Message: fmt.Sprintf("SyncSet %s holds %d objects (%s) on %s", id, len(want), done, s.target)}, nil
}

// Withdraw deletes reg's SyncSet; a SyncSet already gone is done too. OCM
// has Hive delete the SyncSet's objects from the hub, and does not say when.
func (d *OCMDelivery) Withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	report, err := d.withdraw(ctx, hub, reg)
	if err != nil {
		return ocmFailed(fmt.Errorf("Withdraw(%s): %w", reg.ID, err))
	}
	return report, nil
}

func (d *OCMDelivery) withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	s, err := d.open(ctx, hub)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	defer s.close()
	id := fleet.SyncSetName(reg)
	gone, err := s.delete(ctx, id)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	msg := fmt.Sprintf("SyncSet %s deleted from %s; Hive removes its objects from the hub", id, s.target)
	if gone {
		msg = fmt.Sprintf("SyncSet %s is not in %s", id, s.target)
	}
	d.logger.Info("SyncSet withdrawn", "hub", hub.ID, "registration", reg.ID, "syncset", id, "already_gone", gone)
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonSyncSetDeleted, NoAgent: true, Message: msg}, nil
}

// Close closes every connection, each once its calls in flight are done;
// Deliver and Withdraw fail after.
func (d *OCMDelivery) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	var errs []error
	for id, c := range d.conns {
		delete(d.conns, id)
		errs = append(errs, d.retire(c))
	}
	return errors.Join(errs...)
}

// ocmInvalid is a failure no retry mends: the hub's OCM target or
// credentials, or the registration's objects, need fixing.
type ocmInvalid struct{ msg string }

func (e *ocmInvalid) Error() string { return e.msg }

func ocmInvalidf(format string, args ...any) error {
	return &ocmInvalid{msg: fmt.Sprintf(format, args...)}
}

// ocmFailed reports a failed step: DeliveryFailed without an error for what
// no retry mends, otherwise as Failed decides.
func ocmFailed(err error) (fleet.DeliveryReport, error) {
	var invalid *ocmInvalid
	if errors.As(err, &invalid) {
		return fleet.DeliveryReport{NoAgent: true, Reason: fleet.ReasonDeliveryFailed, Message: err.Error()}, nil
	}
	return Failed(err)
}

// ocmResources makes rendered objects JSON-clean, as OCM stores and returns
// them, so that they compare with what a GET returns.
func ocmResources(objects []map[string]any) ([]any, error) {
	resources, err := ocmNormalise(objects)
	if err != nil {
		return nil, err
	}
	for i, r := range resources {
		obj, _ := r.(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		if obj["apiVersion"] == nil || obj["kind"] == nil || meta["name"] == nil {
			return nil, fmt.Errorf("objects[%d] lacks apiVersion, kind or metadata.name", i)
		}
	}
	return resources, nil
}

// ocmNormalise round-trips v through JSON: numbers become float64, typed
// maps and slices generic ones.
func ocmNormalise(v any) ([]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// ocmSameResources compares a SyncSet's resources with the wanted ones.
func ocmSameResources(have []any, want []any) bool {
	normal, err := ocmNormalise(have)
	return err == nil && reflect.DeepEqual(normal, want)
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

// apply makes SyncSet id hold want and says what it did: "created",
// "updated" or "unchanged".
func (s *ocmSession) apply(ctx context.Context, id string, want []any) (string, error) {
	have, err := s.get(ctx, id)
	if err != nil {
		return "", err
	}
	if have == nil {
		err := s.create(ctx, id, want)
		if ocmStatus(err) != http.StatusConflict {
			return "created", err
		}
		// Created meanwhile by another pass: compare with what it holds.
		if have, err = s.get(ctx, id); err != nil {
			return "", err
		}
		if have == nil {
			return "", fmt.Errorf("SyncSet %s was created and deleted meanwhile", id)
		}
	}
	if ocmSameResources(have.Resources(), want) {
		return "unchanged", nil
	}
	return "updated", s.update(ctx, id, want)
}

// ocmCall sends one request to a cluster's syncsets and returns its status.
type ocmCall func(ctx context.Context, syncsets *cmv1.SyncsetsClient) (int, error)

// get returns SyncSet id, nil when there is none.
func (s *ocmSession) get(ctx context.Context, id string) (*cmv1.Syncset, error) {
	var found *cmv1.Syncset
	err := s.do(ctx, OpGet, func(ctx context.Context, c *cmv1.SyncsetsClient) (int, error) {
		resp, err := c.Syncset(id).Get().SendContext(ctx)
		found = resp.Body()
		return resp.Status(), err
	})
	if ocmStatus(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get SyncSet %s: %w", id, err)
	}
	if found == nil {
		found = &cmv1.Syncset{}
	}
	return found, nil
}

func (s *ocmSession) create(ctx context.Context, id string, resources []any) error {
	body, err := cmv1.NewSyncset().ID(id).Resources(resources...).Build()
	if err != nil {
		return fmt.Errorf("create SyncSet %s: %w", id, err)
	}
	err = s.do(ctx, OpCreate, func(ctx context.Context, c *cmv1.SyncsetsClient) (int, error) {
		resp, err := c.Add().Body(body).SendContext(ctx)
		return resp.Status(), err
	})
	if err != nil {
		return fmt.Errorf("create SyncSet %s: %w", id, err)
	}
	return nil
}

func (s *ocmSession) update(ctx context.Context, id string, resources []any) error {
	body, err := cmv1.NewSyncset().Resources(resources...).Build()
	if err != nil {
		return fmt.Errorf("update SyncSet %s: %w", id, err)
	}
	err = s.do(ctx, OpUpdate, func(ctx context.Context, c *cmv1.SyncsetsClient) (int, error) {
		resp, err := c.Syncset(id).Update().Body(body).SendContext(ctx)
		return resp.Status(), err
	})
	if err != nil {
		return fmt.Errorf("update SyncSet %s: %w", id, err)
	}
	return nil
}

// delete deletes SyncSet id; gone is true when there was none.
func (s *ocmSession) delete(ctx context.Context, id string) (gone bool, err error) {
	err = s.do(ctx, OpDelete, func(ctx context.Context, c *cmv1.SyncsetsClient) (int, error) {
		resp, err := c.Syncset(id).Delete().SendContext(ctx)
		return resp.Status(), err
	})
	if ocmStatus(err) == http.StatusNotFound {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete SyncSet %s: %w", id, err)
	}
	return false, nil
}

// do runs call; when the API refuses the access token (401), it runs it once
// more on a new connection, with a new token.
func (s *ocmSession) do(ctx context.Context, op string, call ocmCall) error {
	err := s.try(ctx, op, call)
	var api *APIError
	if !errors.As(err, &api) || api.Status != http.StatusUnauthorized || api.Op == OpToken {
		return err
	}
	s.d.logger.Info("OCM refused the access token; retrying with a new one", "hub", s.hubID, "operation", op)
	if err := s.renew(); err != nil {
		return err
	}
	return s.try(ctx, op, call)
}

// try runs call within the call timeout, counts it and turns its failure
// into an APIError.
func (s *ocmSession) try(ctx context.Context, op string, call ocmCall) error {
	ctx, cancel := context.WithTimeout(ctx, s.d.cfg.Timeout)
	defer cancel()
	trace := &ocmTrace{}
	clusters := s.conn.conn.ClustersMgmt().V1().Clusters()
	status, err := call(context.WithValue(ctx, ocmTraceKey{}, trace), clusters.Cluster(s.target.ClusterID).ExternalConfiguration().Syncsets())
	if err == nil && status >= 200 && status < 300 {
		s.d.metrics.Call(fleet.DeliverySyncSetOCM, op, OutcomeSuccess)
		return nil
	}
	apiErr := trace.apiError(op, status, err)
	if apiErr.Op != OpToken { // no request reached the API
		s.d.metrics.Call(fleet.DeliverySyncSetOCM, op, OutcomeOf(apiErr.Status))
	}
	return apiErr
}

// ocmStatus is the HTTP status of a failed call, 0 when none.
func ocmStatus(err error) int {
	var api *APIError
	if errors.As(err, &api) && api.Op != OpToken {
		return api.Status
	}
	return 0
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
