package syncset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	cmv1 "github.com/openshift-online/ocm-sdk-go/clustersmgmt/v1"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

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
	id := fleet.OCMSyncSetID(reg)
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
	if done == "created" {
		// A registration an earlier release delivered has its SyncSet under
		// the legacy id too: it goes once this one holds the objects.
		if _, err := s.delete(ctx, fleet.LegacyOCMSyncSetID(reg)); err != nil {
			return fleet.DeliveryReport{}, err
		}
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
	if _, err := s.delete(ctx, fleet.LegacyOCMSyncSetID(reg)); err != nil {
		return fleet.DeliveryReport{}, err
	}
	id := fleet.OCMSyncSetID(reg)
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
