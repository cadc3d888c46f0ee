package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"

	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// NewHTTPClient returns the one HTTP client the agent uses for the fleet
// manager. Its transport keeps connections alive and prefers HTTP/2, where
// the long-poll, heartbeats and batches share one connection; its timeouts
// outlast a long-poll. Every request carries a bearer token from ts.
func NewHTTPClient(cfg Config, ts oauth2.TokenSource) *http.Client {
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       cfg.PollWait + 90*time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.PollWait + 30*time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: &oauth2.Transport{Source: ts, Base: base}, Timeout: cfg.PollWait + time.Minute}
}

// NewTokenHTTPClient returns the client that fetches OIDC tokens.
func NewTokenHTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second}
}

// FleetClient calls the fleet manager's private API for one hub.
type FleetClient struct {
	api   *private.ClientWithResponses
	hubID string
}

// NewFleetClient returns a client of the private API at baseURL (which
// includes the API base path) for hubID, sending its requests with doer.
func NewFleetClient(baseURL, hubID string, doer private.HttpRequestDoer) (*FleetClient, error) {
	api, err := private.NewClientWithResponses(baseURL, private.WithHTTPClient(doer))
	if err != nil {
		return nil, fmt.Errorf("NewFleetClient(%s): %w", baseURL, err)
	}
	return &FleetClient{api: api, hubID: hubID}, nil
}

// StatusError is an answer of the fleet manager other than success.
type StatusError struct {
	Op     string
	Status int
	// Code and Reason come from the error body, when there is one.
	Code   string
	Reason string
	// RetryAfter is how long the fleet manager asked to wait (its
	// Retry-After), zero when it did not ask.
	RetryAfter time.Duration
}

// retryAfter reads a Retry-After header, which the private API declares in
// seconds; an absent or negative one is zero.
func retryAfter(h http.Header) time.Duration {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil {
		return 0
	}
	return max(time.Duration(secs)*time.Second, 0)
}

func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s: %d %s: %s", e.Op, e.Status, e.Code, e.Reason)
	}
	return fmt.Sprintf("%s: %d %s", e.Op, e.Status, http.StatusText(e.Status))
}

// permanent reports whether err is an answer that the same request would get
// again: the request itself is wrong (400, 413, 415, 422). Everything else
// (a network error, 401 while a token rotates, 404 while a hub is being
// registered, 5xx) may pass later.
func permanent(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

func statusError(op string, resp *http.Response, body *private.Error) error {
	e := &StatusError{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	if body != nil {
		e.Code, e.Reason = body.Code, body.Reason
	}
	return e
}

// firstError returns the first error body the generated client decoded.
func firstError(bodies ...*private.Error) *private.Error {
	for _, b := range bodies {
		if b != nil {
			return b
		}
	}
	return nil
}

// waitParam spells d as the API's wait parameter, ^[0-9]+(ms|s|m)$.
func waitParam(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// GetHubDesired long-polls for the hub's desired set past revision after,
// waiting up to wait. It returns nil (and no error) when nothing changed.
// With since above 0, the agent holds that revision's whole set, and the
// answer may be the changes since it (its BaseRevision set).
func (c *FleetClient) GetHubDesired(ctx context.Context, after, since int64, wait time.Duration) (*private.DesiredSet, error) {
	w := waitParam(wait)
	params := &private.GetHubDesiredParams{After: &after, Wait: &w}
	if since > 0 {
		params.Since = &since
	}
	resp, err := c.api.GetHubDesiredWithResponse(ctx, c.hubID, params)
	const op = "GetHubDesired"
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s(after=%d): %w", op, after, err)
	case resp.StatusCode() == http.StatusNotModified:
		return nil, nil
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return resp.JSON200, nil
	}
	return nil, statusError(op, resp.HTTPResponse, firstError(resp.JSON400, resp.JSON401, resp.JSON404, resp.JSON500, resp.JSON503))
}

// PutHubStatus sends the heartbeat.
func (c *FleetClient) PutHubStatus(ctx context.Context, report private.HubStatusReport) (private.HubStatusAck, error) {
	resp, err := c.api.PutHubStatusWithResponse(ctx, c.hubID, report)
	const op = "PutHubStatus"
	switch {
	case err != nil:
		return private.HubStatusAck{}, fmt.Errorf("%s: %w", op, err)
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return *resp.JSON200, nil
	}
	return private.HubStatusAck{}, statusError(op, resp.HTTPResponse,
		firstError(resp.JSON400, resp.JSON401, resp.JSON404, resp.JSON413, resp.JSON415, resp.JSON500, resp.JSON503))
}

// PostHubInventory sends one inventory batch.
func (c *FleetClient) PostHubInventory(ctx context.Context, batch private.InventoryBatch) (private.InventoryAck, error) {
	resp, err := c.api.PostHubInventoryWithResponse(ctx, c.hubID, batch)
	const op = "PostHubInventory"
	switch {
	case err != nil:
		return private.InventoryAck{}, fmt.Errorf("%s: %w", op, err)
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return *resp.JSON200, nil
	}
	return private.InventoryAck{}, statusError(op, resp.HTTPResponse,
		firstError(resp.JSON400, resp.JSON401, resp.JSON404, resp.JSON413, resp.JSON415, resp.JSON500, resp.JSON503))
}

// PutRegistrationsStatus sends the hub-side status of some registrations and
// returns how many the fleet manager updated.
func (c *FleetClient) PutRegistrationsStatus(ctx context.Context, items []private.RegistrationStatus) (int, error) {
	resp, err := c.api.PutRegistrationsStatusWithResponse(ctx, c.hubID, private.RegistrationStatusBatch{Items: items})
	const op = "PutRegistrationsStatus"
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: %w", op, err)
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return resp.JSON200.Updated, nil
	}
	return 0, statusError(op, resp.HTTPResponse,
		firstError(resp.JSON400, resp.JSON401, resp.JSON404, resp.JSON413, resp.JSON415, resp.JSON500, resp.JSON503))
}

// GetHubResourceKinds returns the kinds the fleet manager wants synced.
func (c *FleetClient) GetHubResourceKinds(ctx context.Context) ([]private.ResourceKind, error) {
	resp, err := c.api.GetHubResourceKindsWithResponse(ctx, c.hubID)
	const op = "GetHubResourceKinds"
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", op, err)
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return resp.JSON200.Items, nil
	}
	return nil, statusError(op, resp.HTTPResponse, firstError(resp.JSON401, resp.JSON404, resp.JSON500, resp.JSON503))
}

// PostHubResources sends one batch of a synced kind.
func (c *FleetClient) PostHubResources(ctx context.Context, batch private.ResourceBatch) (private.InventoryAck, error) {
	resp, err := c.api.PostHubResourcesWithResponse(ctx, c.hubID, batch)
	const op = "PostHubResources"
	switch {
	case err != nil:
		return private.InventoryAck{}, fmt.Errorf("%s: %w", op, err)
	case resp.StatusCode() == http.StatusOK && resp.JSON200 != nil:
		return *resp.JSON200, nil
	}
	return private.InventoryAck{}, statusError(op, resp.HTTPResponse,
		firstError(resp.JSON400, resp.JSON401, resp.JSON404, resp.JSON413, resp.JSON415, resp.JSON500, resp.JSON503))
}
