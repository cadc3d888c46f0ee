package syncset

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// HiveConfig is the syncset-hive delivery's configuration: how it talks to
// the Hive clusters that hold the SyncSets.
type HiveConfig struct {
	// FieldManager is the server-side apply field manager of the SyncSets and
	// their source Secrets.
	FieldManager string
	// Timeout bounds one API call to a Hive cluster.
	Timeout time.Duration
	// QPS and Burst limit the calls to one Hive cluster.
	QPS   float32
	Burst int
}

// DefaultHiveConfig returns the syncset-hive defaults.
func DefaultHiveConfig() HiveConfig {
	return HiveConfig{FieldManager: "fleet-manager", Timeout: 30 * time.Second, QPS: 20, Burst: 40}
}

// AddFlags binds the configuration to flags.
func (c *HiveConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.FieldManager, "hive-field-manager", c.FieldManager, "server-side apply field manager of the SyncSets on Hive clusters (syncset-hive hubs)")
	fs.DurationVar(&c.Timeout, "hive-timeout", c.Timeout, "timeout of one API call to a Hive cluster")
	fs.Float32Var(&c.QPS, "hive-qps", c.QPS, "API calls per second to one Hive cluster")
	fs.IntVar(&c.Burst, "hive-burst", c.Burst, "burst of API calls to one Hive cluster")
}

// Validate reports every invalid setting, naming its flag.
func (c HiveConfig) Validate() error {
	var p config.Problems
	if c.FieldManager == "" || len(c.FieldManager) > 128 {
		p.Addf("hive-field-manager", "must be 1 to 128 characters (got %q)", c.FieldManager)
	}
	if c.Timeout < time.Second || c.Timeout > 10*time.Minute {
		p.Addf("hive-timeout", "must be between 1s and 10m (got %s)", c.Timeout)
	}
	if c.QPS <= 0 || c.QPS > 10_000 {
		p.Addf("hive-qps", "must be above 0 and at most 10000 (got %g)", c.QPS)
	}
	if c.Burst < 1 || c.Burst > 10_000 {
		p.Addf("hive-burst", "must be between 1 and 10000 (got %d)", c.Burst)
	}
	return p.Err()
}

// Where the syncset-hive delivery writes on a Hive cluster, and what Hive's
// clustersync controller records of each SyncSet it applied.
var (
	hiveSyncSets     = schema.GroupVersionResource{Group: "hive.openshift.io", Version: "v1", Resource: "syncsets"}
	hiveClusterSyncs = schema.GroupVersionResource{Group: "hiveinternal.openshift.io", Version: "v1alpha1", Resource: "clustersyncs"}
	hiveSecrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
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

// hiveClient is a hub's client, built from the kubeconfig whose hash is sum.
type hiveClient struct {
	sum string
	dyn dynamic.Interface
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

// open returns the client of hub's Hive cluster, built from its kubeconfig
// on first use and whenever the kubeconfig changes.
func (d *HiveDelivery) open(ctx context.Context, hub fleet.Hub) (*hiveHub, error) {
	if hub.Hive == nil {
		return nil, hiveInvalidf("hub %s has no Hive target (hive.cluster_deployment_namespace and cluster_deployment_name)", hub.Name)
	}
	creds, err := d.src.HubCredentials(ctx, hub.ID)
	if err != nil {
		return nil, fmt.Errorf("HubCredentials(%s): %w", hub.ID, err)
	}
	kubeconfig := creds[fleet.CredentialHiveKubeconfig]
	if kubeconfig == "" {
		return nil, hiveInvalidf("hub %s has no %s credential (of its Hive cluster)", hub.Name, fleet.CredentialHiveKubeconfig)
	}
	sum := sha256.Sum256([]byte(kubeconfig))
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.clients[hub.ID]
	if !ok || c.sum != hex.EncodeToString(sum[:]) {
		cfg, err := d.restConfig(hub, []byte(kubeconfig))
		if err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, hiveInvalidf("the Hive kubeconfig of hub %s is not usable: %v", hub.Name, err)
		}
		c = hiveClient{sum: hex.EncodeToString(sum[:]), dyn: dyn}
		d.clients[hub.ID] = c
	}
	return &hiveHub{dyn: c.dyn, target: *hub.Hive, hubID: hub.ID, fieldManager: d.cfg.FieldManager, metrics: d.metrics}, nil
}

// restConfig turns a hub's kubeconfig into a client configuration, as
// clientcmd.RESTConfigFromKubeConfig does, after refusing what would run a
// program or read a file of the fleet manager's own (its credentials are
// data, never a path or a command).
func (d *HiveDelivery) restConfig(hub fleet.Hub, kubeconfig []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		d.logger.Warn("unreadable Hive kubeconfig", "hub", hub.ID, "error", err)
		return nil, hiveInvalidf("the Hive kubeconfig of hub %s cannot be read", hub.Name)
	}
	if err := hiveSelfContained(raw); err != nil {
		return nil, hiveInvalidf("the Hive kubeconfig of hub %s is not usable: %v", hub.Name, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, hiveInvalidf("the Hive kubeconfig of hub %s is not usable: %v", hub.Name, err)
	}
	cfg.Timeout, cfg.QPS, cfg.Burst = d.cfg.Timeout, d.cfg.QPS, d.cfg.Burst
	cfg.UserAgent = "fleet-manager/" + string(fleet.DeliverySyncSetHive)
	cfg.WarningHandler = hiveWarnings{logger: d.logger.With("hub", hub.ID)}
	return cfg, nil
}

// hiveSelfContained refuses exec plugins, auth providers and file references.
func hiveSelfContained(cfg *clientcmdapi.Config) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		a := cfg.AuthInfos[name]
		if a.Exec != nil || a.AuthProvider != nil {
			return fmt.Errorf("user %q runs an exec plugin or auth provider: embed a token or client certificate", name)
		}
		if a.TokenFile != "" || a.ClientCertificate != "" || a.ClientKey != "" {
			return fmt.Errorf("user %q refers to files: embed the token or client certificate data", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if cfg.Clusters[name].CertificateAuthority != "" {
			return fmt.Errorf("cluster %q refers to a CA file: embed certificate-authority-data", name)
		}
	}
	return nil
}

// hiveWarnings logs the API server's warnings instead of klog's stderr.
type hiveWarnings struct{ logger *slog.Logger }

func (w hiveWarnings) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		w.logger.Warn("Hive API server warning", "warning", text)
	}
}

// hiveSet is a registration's SyncSet and the source Secrets it maps.
type hiveSet struct {
	syncSet   *unstructured.Unstructured
	secrets   []*unstructured.Unstructured
	resources int
}

// hiveRender puts a registration's objects in its SyncSet; each Secret goes
// into a source Secret next to the SyncSet, mapped to its place on the hub.
func hiveRender(target fleet.HiveTarget, hubID string, reg fleet.Registration, objects []map[string]any) (hiveSet, error) {
	name := fleet.SyncSetName(reg)
	own := map[string]string{fleet.LabelRegistrationID: reg.ID, fleet.LabelOrgID: reg.OrgID, fleet.LabelHubID: hubID, fleet.LabelManagedBy: hiveManagedBy}
	var set hiveSet
	resources, mappings := []any{}, []any{}
	for i, o := range objects {
		obj, err := hiveObject(o)
		if err != nil {
			return hiveSet{}, hiveInvalidf("registration %s: objects[%d]: %v", reg.ID, i, err)
		}
		if obj.GetAPIVersion() != "v1" || obj.GetKind() != "Secret" {
			resources = append(resources, obj.Object)
			continue
		}
		source, err := hiveSourceSecret(target.Namespace, name, own, obj)
		if err != nil {
			return hiveSet{}, hiveInvalidf("registration %s: objects[%d]: %v", reg.ID, i, err)
		}
		for _, s := range set.secrets {
			if s.GetName() == source.GetName() {
				return hiveSet{}, hiveInvalidf("registration %s: two Secrets map to source Secret %s", reg.ID, s.GetName())
			}
		}
		set.secrets = append(set.secrets, source)
		mappings = append(mappings, map[string]any{
			"sourceRef": map[string]any{"name": source.GetName(), "namespace": target.Namespace},
			"targetRef": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		})
	}
	spec := map[string]any{
		"clusterDeploymentRefs": []any{map[string]any{"name": target.ClusterDeployment}},
		"resourceApplyMode":     hiveModeSync,
		"resources":             resources,
	}
	if len(mappings) > 0 {
		spec["secretMappings"] = mappings
	}
	set.syncSet = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "hive.openshift.io/v1", "kind": "SyncSet", "spec": spec}}
	set.syncSet.SetName(name)
	set.syncSet.SetNamespace(target.Namespace)
	set.syncSet.SetLabels(own)
	set.resources = len(resources)
	return set, nil
}

// hiveObject makes a rendered object JSON-clean (int64 numbers, no Go types).
func hiveObject(o map[string]any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s without a name", obj.GetKind())
	}
	return obj, nil
}

// hiveSourceSecret holds a Secret's data (stringData encoded) next to the
// SyncSet, with the SyncSet's labels over the Secret's own: Hive copies its
// type, data, labels and annotations to the hub.
func hiveSourceSecret(namespace, syncSet string, own map[string]string, secret *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if secret.GetNamespace() == "" {
		return nil, fmt.Errorf("Secret %s without a namespace", secret.GetName())
	}
	data, _, err := unstructured.NestedStringMap(secret.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("Secret %s: data: %w", secret.GetName(), err)
	}
	plain, _, err := unstructured.NestedStringMap(secret.Object, "stringData")
	if err != nil {
		return nil, fmt.Errorf("Secret %s: stringData: %w", secret.GetName(), err)
	}
	encoded := map[string]any{}
	for k, v := range data {
		encoded[k] = v
	}
	for k, v := range plain {
		encoded[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	secretType, _, _ := unstructured.NestedString(secret.Object, "type")
	if secretType == "" {
		secretType = "Opaque"
	}
	source := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": secretType, "data": encoded}}
	source.SetName(hiveSourceSecretName(syncSet, secret.GetNamespace(), secret.GetName()))
	source.SetNamespace(namespace)
	lbls := secret.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	maps.Copy(lbls, own)
	source.SetLabels(lbls)
	source.SetAnnotations(secret.GetAnnotations())
	return source, nil
}

// hiveSourceSecretName is <syncset>-<secret>, shortened with a hash of the
// Secret's namespace and name past the 253 characters of a name.
func hiveSourceSecretName(syncSet, namespace, name string) string {
	full := syncSet + "-" + name
	if len(full) <= 253 {
		return full
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(full[:253-len(suffix)], "-.") + suffix
}

// hiveHub is one Hive cluster and the ClusterDeployment of a hub on it.
type hiveHub struct {
	dyn          dynamic.Interface
	target       fleet.HiveTarget
	hubID        string
	fieldManager string
	metrics      *Metrics
}

// call runs one API call, counts it and wraps its failure in an APIError.
func (h *hiveHub) call(op string, fn func() error) error {
	err := fn()
	if err == nil {
		h.metrics.Call(fleet.DeliverySyncSetHive, op, OutcomeSuccess)
		return nil
	}
	apiErr := &APIError{Mode: fleet.DeliverySyncSetHive, Op: op, Err: err}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		apiErr.Status, apiErr.Reason = int(status.Status().Code), status.Status().Message
	}
	h.metrics.Call(fleet.DeliverySyncSetHive, op, OutcomeOf(apiErr.Status))
	return apiErr
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
