package syncset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// hiveClient is a hub's client, built from the kubeconfig whose hash is sum.
type hiveClient struct {
	sum string
	dyn dynamic.Interface
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
