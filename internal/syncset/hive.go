package syncset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// Where the syncset-hive delivery writes on a Hive cluster, and what Hive's
// clustersync controller records of each SyncSet it applied.
var (
	hiveSyncSets     = hubkind.SyncSet.GVR()
	hiveClusterSyncs = hubkind.ClusterSync.GVR()
	hiveSecrets      = hubkind.Secret.GVR()
)

const (
	// hiveManagedBy marks the SyncSets and source Secrets this delivery owns.
	hiveManagedBy = "fleet-manager"
	hiveModeSync  = "Sync"
	// hiveModeUpsert makes Hive leave a SyncSet's objects when it goes.
	hiveModeUpsert = "Upsert"
)

// HiveDelivery delivers registrations to syncset-hive hubs: each
// registration's objects go in a hive.openshift.io/v1 SyncSet (mode Sync) in
// the namespace of the hub's ClusterDeployment on the Hive cluster that
// provisioned it, its Secrets through secretMappings, never in plain text in
// the SyncSet (ARCHITECTURE.md section 6). It is a fleet.Delivery and a
// fleet.Releaser.
type HiveDelivery struct {
	cfg     HiveConfig
	src     Source
	metrics *Metrics
	logger  *slog.Logger

	mu      sync.Mutex
	clients map[string]hiveClient // by hub id
}

var (
	_ fleet.Delivery = (*HiveDelivery)(nil)
	_ fleet.Releaser = (*HiveDelivery)(nil)
)

// NewHiveDelivery returns the syncset-hive delivery; metrics may be nil.
func NewHiveDelivery(cfg HiveConfig, src Source, metrics *Metrics, logger *slog.Logger) *HiveDelivery {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &HiveDelivery{cfg: cfg, src: src, metrics: metrics, logger: logger.With("delivery", fleet.DeliverySyncSetHive),
		clients: map[string]hiveClient{}}
}

// Deliver applies reg's SyncSet, after the source Secrets it maps, and
// removes the source Secrets it no longer maps. Server-side apply makes an
// unchanged registration cost no write.
func (d *HiveDelivery) Deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	start := time.Now()
	report, err := d.deliver(ctx, hub, reg)
	d.metrics.Applied(fleet.DeliverySyncSetHive, start, err)
	if err != nil {
		return hiveFailed(fmt.Errorf("Deliver(%s): %w", reg.ID, err))
	}
	return report, nil
}

func (d *HiveDelivery) deliver(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	h, err := d.open(ctx, hub)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	objects, err := d.src.RegistrationObjects(ctx, hub.ID, reg)
	if err != nil {
		return fleet.DeliveryReport{}, fmt.Errorf("RegistrationObjects: %w", err)
	}
	set, err := hiveRender(*hub.Hive, hub.ID, reg, objects)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	keep := map[string]bool{}
	for _, s := range set.secrets {
		keep[s.GetName()] = true
		if err := h.apply(ctx, hiveSecrets, s); err != nil {
			return fleet.DeliveryReport{}, err
		}
	}
	if err := h.apply(ctx, hiveSyncSets, set.syncSet); err != nil {
		return fleet.DeliveryReport{}, err
	}
	if err := h.pruneSecrets(ctx, reg, keep); err != nil {
		return fleet.DeliveryReport{}, err
	}
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonSyncSetApplied, NoAgent: true,
		Message: fmt.Sprintf("SyncSet %s/%s holds %d objects and %d secret mappings for %s",
			hub.Hive.Namespace, set.syncSet.GetName(), set.resources, len(set.secrets), hub.Hive)}, nil
}

// Withdraw deletes reg's SyncSet and its source Secrets; done when the
// SyncSet is gone and Hive, which deletes its objects from the hub, no longer
// tracks any of them.
func (d *HiveDelivery) Withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	report, err := d.withdraw(ctx, hub, reg)
	if err != nil {
		return hiveFailed(fmt.Errorf("Withdraw(%s): %w", reg.ID, err))
	}
	return report, nil
}

func (d *HiveDelivery) withdraw(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	h, err := d.open(ctx, hub)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	name := fleet.SyncSetName(reg)
	if waiting, err := h.remove(ctx, reg); err != nil || waiting != "" {
		return fleet.DeliveryReport{Reason: fleet.ReasonWithdrawing, Message: waiting, NoAgent: true}, err
	}
	st, found, err := h.syncStatus(ctx, name)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	if found && len(st.ResourcesToDelete) > 0 {
		msg := fmt.Sprintf("SyncSet %s/%s is gone; Hive still has to delete %d of its objects from the hub", h.target.Namespace, name, len(st.ResourcesToDelete))
		if st.FailureMessage != "" {
			msg += ": " + st.FailureMessage
		}
		return fleet.DeliveryReport{Reason: fleet.ReasonWithdrawing, Message: msg, NoAgent: true}, nil
	}
	d.logger.Info("SyncSet withdrawn", "hub", hub.ID, "registration", reg.ID, "syncset", name)
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonSyncSetDeleted, NoAgent: true,
		Message: fmt.Sprintf("SyncSet %s/%s and its objects are gone", h.target.Namespace, name)}, nil
}

// Release lets go of reg's objects for the hub's agent, which already holds
// them: it switches the SyncSet to Upsert, waits until Hive has seen that
// (its ClusterSync tracks nothing of the SyncSet for deletion any more), and
// only then deletes the SyncSet and its source Secrets. Deleting it earlier
// would make Hive delete the objects under the agent.
func (d *HiveDelivery) Release(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	report, err := d.release(ctx, hub, reg)
	if err != nil {
		return hiveFailed(fmt.Errorf("Release(%s): %w", reg.ID, err))
	}
	return report, nil
}

func (d *HiveDelivery) release(ctx context.Context, hub fleet.Hub, reg fleet.Registration) (fleet.DeliveryReport, error) {
	h, err := d.open(ctx, hub)
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	ss, err := h.getSyncSet(ctx, fleet.SyncSetName(reg))
	if err != nil {
		return fleet.DeliveryReport{}, err
	}
	if ss != nil {
		if waiting, err := h.letGo(ctx, ss); err != nil || waiting != "" {
			return fleet.DeliveryReport{Reason: fleet.ReasonHandingOff, Message: waiting}, err
		}
	}
	if waiting, err := h.remove(ctx, reg); err != nil || waiting != "" {
		return fleet.DeliveryReport{Reason: fleet.ReasonHandingOff, Message: waiting}, err
	}
	d.logger.Info("SyncSet released", "hub", hub.ID, "registration", reg.ID, "syncset", fleet.SyncSetName(reg))
	return fleet.DeliveryReport{Done: true, Reason: fleet.ReasonHandingOff,
		Message: fmt.Sprintf("SyncSet %s/%s is gone; Hive left its objects on the hub", h.target.Namespace, fleet.SyncSetName(reg))}, nil
}

// hiveInvalid is a failure no retry mends: the hub's Hive target or
// kubeconfig, or the registration's objects, need fixing.
type hiveInvalid struct{ msg string }

func (e *hiveInvalid) Error() string { return e.msg }

func hiveInvalidf(format string, args ...any) error {
	return &hiveInvalid{msg: fmt.Sprintf(format, args...)}
}

// hiveFailed reports a failed step: DeliveryFailed without an error for
// what no retry mends, otherwise as Failed decides.
func hiveFailed(err error) (fleet.DeliveryReport, error) {
	var invalid *hiveInvalid
	if errors.As(err, &invalid) {
		return fleet.DeliveryReport{NoAgent: true, Reason: fleet.ReasonDeliveryFailed, Message: err.Error()}, nil
	}
	return Failed(err)
}

// apply server-side applies obj in its namespace, forcing ownership.
func (h *hiveHub) apply(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	force := true
	err = h.call(OpApply, func() error {
		_, err := h.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: h.fieldManager, Force: &force})
		return err
	})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// delete deletes an object of the ClusterDeployment's namespace; gone is fine.
func (h *hiveHub) delete(ctx context.Context, gvr schema.GroupVersionResource, name string) error {
	err := h.call(OpDelete, func() error {
		return h.dyn.Resource(gvr).Namespace(h.target.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, h.target.Namespace, name, err)
	}
	return nil
}

// getSyncSet returns a SyncSet, nil when there is none.
func (h *hiveHub) getSyncSet(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	var ss *unstructured.Unstructured
	err := h.call(OpGet, func() (err error) {
		ss, err = h.dyn.Resource(hiveSyncSets).Namespace(h.target.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get SyncSet %s/%s: %w", h.target.Namespace, name, err)
	}
	return ss, nil
}

// pruneSecrets deletes reg's source Secrets whose names keep lacks.
func (h *hiveHub) pruneSecrets(ctx context.Context, reg fleet.Registration, keep map[string]bool) error {
	selector := labels.SelectorFromSet(labels.Set{
		fleet.LabelRegistrationID: reg.ID, fleet.LabelHubID: h.hubID, fleet.LabelManagedBy: hiveManagedBy,
	}).String()
	var list *unstructured.UnstructuredList
	err := h.call(OpGet, func() (err error) {
		list, err = h.dyn.Resource(hiveSecrets).Namespace(h.target.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err
	})
	if err != nil {
		return fmt.Errorf("list source Secrets in %s: %w", h.target.Namespace, err)
	}
	for _, s := range list.Items {
		if !keep[s.GetName()] {
			if err := h.delete(ctx, hiveSecrets, s.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// remove deletes reg's SyncSet and source Secrets, and says what holds the
// SyncSet back ("" once a Get answers 404).
func (h *hiveHub) remove(ctx context.Context, reg fleet.Registration) (string, error) {
	name := fleet.SyncSetName(reg)
	if err := h.delete(ctx, hiveSyncSets, name); err != nil {
		return "", err
	}
	if err := h.pruneSecrets(ctx, reg, nil); err != nil {
		return "", err
	}
	ss, err := h.getSyncSet(ctx, name)
	if err != nil || ss == nil {
		return "", err
	}
	return fmt.Sprintf("SyncSet %s/%s is being deleted; finalizers %v hold it", h.target.Namespace, name, ss.GetFinalizers()), nil
}

// letGo switches a SyncSet to Upsert and says what Hive has yet to see
// before the SyncSet may go ("" when nothing).
func (h *hiveHub) letGo(ctx context.Context, ss *unstructured.Unstructured) (string, error) {
	generation := ss.GetGeneration()
	if mode, _, _ := unstructured.NestedString(ss.Object, "spec", "resourceApplyMode"); mode != hiveModeUpsert {
		patch := []byte(`{"spec":{"resourceApplyMode":"` + hiveModeUpsert + `"}}`)
		var patched *unstructured.Unstructured
		err := h.call(OpUpdate, func() (err error) {
			patched, err = h.dyn.Resource(hiveSyncSets).Namespace(h.target.Namespace).Patch(ctx, ss.GetName(), types.MergePatchType, patch,
				metav1.PatchOptions{FieldManager: h.fieldManager})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("set resourceApplyMode %s on SyncSet %s/%s: %w", hiveModeUpsert, h.target.Namespace, ss.GetName(), err)
		}
		generation = patched.GetGeneration()
	}
	st, found, err := h.syncStatus(ctx, ss.GetName())
	switch {
	case err != nil || !found:
		return "", err
	case st.ObservedGeneration < generation:
		return fmt.Sprintf("waiting for Hive to see resourceApplyMode %s on SyncSet %s/%s (generation %d; Hive saw %d)",
			hiveModeUpsert, h.target.Namespace, ss.GetName(), generation, st.ObservedGeneration), nil
	case len(st.ResourcesToDelete) > 0:
		return fmt.Sprintf("waiting for Hive to stop tracking %d objects of SyncSet %s/%s for deletion",
			len(st.ResourcesToDelete), h.target.Namespace, ss.GetName()), nil
	}
	return "", nil
}

// hiveSyncStatus is what Hive's ClusterSync records of one SyncSet.
type hiveSyncStatus struct {
	Name               string `json:"name"`
	ObservedGeneration int64  `json:"observedGeneration"`
	ResourcesToDelete  []struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace"`
		Name       string `json:"name"`
	} `json:"resourcesToDelete"`
	Result         string `json:"result"`
	FailureMessage string `json:"failureMessage"`
}

// syncStatus reads what Hive's clustersync controller recorded of a SyncSet
// in the ClusterDeployment's ClusterSync; found is false when it recorded
// nothing (no ClusterSync, or no entry: Hive never applied the SyncSet).
func (h *hiveHub) syncStatus(ctx context.Context, name string) (hiveSyncStatus, bool, error) {
	var cs *unstructured.Unstructured
	err := h.call(OpGet, func() (err error) {
		cs, err = h.dyn.Resource(hiveClusterSyncs).Namespace(h.target.Namespace).Get(ctx, h.target.ClusterDeployment, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return hiveSyncStatus{}, false, nil
	}
	if err != nil {
		return hiveSyncStatus{}, false, fmt.Errorf("get ClusterSync %s/%s: %w", h.target.Namespace, h.target.ClusterDeployment, err)
	}
	raw, _, _ := unstructured.NestedFieldNoCopy(cs.Object, "status", "syncSets")
	b, err := json.Marshal(raw)
	var statuses []hiveSyncStatus
	if err == nil {
		err = json.Unmarshal(b, &statuses)
	}
	if err != nil {
		return hiveSyncStatus{}, false, fmt.Errorf("ClusterSync %s/%s: status.syncSets: %w", h.target.Namespace, h.target.ClusterDeployment, err)
	}
	for _, st := range statuses {
		if st.Name == name {
			return st, true, nil
		}
	}
	return hiveSyncStatus{}, false, nil
}
