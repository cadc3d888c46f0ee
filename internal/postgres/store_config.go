package postgres

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// DefaultStoreConfig returns the store's defaults.
func DefaultStoreConfig() StoreConfig {
	return StoreConfig{
		MaxPageSize:       fleet.MaxPageSize,
		IdempotencyKeyTTL: 24 * time.Hour,
		HeartbeatTimeout:  2 * time.Minute,
		Policies:          fleet.PolicyHubConfig{Namespace: "fleet-policies", ClusterSet: "global"},
		CountedLabels:     []string{"env", "environment", "cloud", "vendor", "openshiftVersion-major-minor"},
		WakeInterval:      50 * time.Millisecond,
		Pools:             fleet.DefaultPoolConfig(),
		DNSResync:         defaultDNSResync,
	}
}

// AddFlags binds the configuration to flags.
func (c *StoreConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.DefaultZone, "registration-default-zone", c.DefaultZone, "zone of registrations that name none (empty: a zone is required)")
	fs.StringSliceVar(&c.Zones.Served, "served-zones", c.Zones.Served, "data-sovereignty zones this deployment serves (empty: every zone)")
	fs.Var(zoneDeploymentsValue{&c.Zones.Deployments}, "zone-deployments", "zone=https URL pairs: the API of the deployment serving each other zone, named when a request asks for a zone not served here")
	fs.IntVar(&c.MaxPageSize, "max-page-size", c.MaxPageSize, "largest page a list answers (at most the specs' size maximum, fleet.MaxPageSize)")
	fs.DurationVar(&c.IdempotencyKeyTTL, "idempotency-key-ttl", c.IdempotencyKeyTTL, "how long an Idempotency-Key is remembered")
	fs.DurationVar(&c.HeartbeatTimeout, "hub-heartbeat-timeout", c.HeartbeatTimeout, "how long an agent hub stays ready after its last heartbeat")
	fs.StringVar(&c.Policies.Namespace, "policy-namespace", c.Policies.Namespace, "namespace on every hub that holds the configuration policies, their Placements and PlacementBindings")
	fs.StringSliceVar(&c.CountedLabels, "inventory-counted-labels", c.CountedLabels, "label keys whose values the inventory counts per hub and the registrations per organisation, so that the total of a search by one of them is read from a counter (changing the set counts the added keys once, at start)")
	fs.DurationVar(&c.WakeInterval, "wake-interval", c.WakeInterval, "shortest time between two wake-ups (NOTIFY) a replica sends the reconcilers after registration writes; the writes committed meanwhile share the next, so writes do not commit one at a time on the notification queue")
	fs.StringVar(&c.Policies.ClusterSet, "policy-cluster-set", c.Policies.ClusterSet, "ManagedClusterSet the policies' Placements select from, bound into --policy-namespace")
	c.addPoolFlags(fs)
	c.addDNSFlags(fs)
}

// Validate reports every invalid setting, naming its flag.
func (c StoreConfig) Validate() error {
	var p config.Problems
	c.validateZones(&p)
	if c.MaxPageSize < 1 || c.MaxPageSize > fleet.MaxPageSize {
		p.Addf("max-page-size", "must be between 1 and %d, the API's limit (got %d)", fleet.MaxPageSize, c.MaxPageSize)
	}
	if c.IdempotencyKeyTTL <= 0 {
		p.Addf("idempotency-key-ttl", "must be positive (got %s)", c.IdempotencyKeyTTL)
	}
	if c.WakeInterval < 0 || c.WakeInterval > time.Minute {
		p.Addf("wake-interval", "must be between 0 and 1m (got %s)", c.WakeInterval)
	}
	if c.HeartbeatTimeout <= 0 {
		p.Addf("hub-heartbeat-timeout", "must be positive (got %s)", c.HeartbeatTimeout)
	}
	// The policy framework names replicated policies "<namespace>.<name>"
	// within 63 characters; a policy's hub name needs at least 20 of them.
	if !fleet.ValidDNSLabel(c.Policies.Namespace) || len(c.Policies.Namespace) > 42 {
		p.Addf("policy-namespace", "%q must be a DNS label of at most 42 characters", c.Policies.Namespace)
	}
	for _, k := range c.CountedLabels {
		if err := fleet.ValidateLabelKey(k); err != nil {
			p.Addf("inventory-counted-labels", "%v", err)
		}
	}
	if !fleet.ValidDNSLabel(c.Policies.ClusterSet) {
		p.Addf("policy-cluster-set", "%q must be a DNS label", c.Policies.ClusterSet)
	}
	c.validatePools(&p)
	c.validateDNS(&p)
	return p.Err()
}

// validateZones checks --served-zones, --zone-deployments and that the
// default zone is one this deployment serves.
func (c StoreConfig) validateZones(p *config.Problems) {
	for _, z := range c.Zones.Served {
		if !fleet.ValidZoneName(z) {
			p.Addf("served-zones", "%q is not a DNS label", z)
		}
	}
	for z, u := range c.Zones.Deployments {
		if !fleet.ValidZoneName(z) {
			p.Addf("zone-deployments", "zone %q is not a DNS label", z)
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Scheme != "https" || parsed.Host == "" || parsed.RawQuery != "" || parsed.Fragment != "" || parsed.User != nil {
			p.Addf("zone-deployments", "zone %s: %q must be an https URL with a host and no user, query or fragment", z, u)
		}
		if c.Zones.Serves(z) && !c.Zones.ServesAll() {
			p.Addf("zone-deployments", "zone %s is served by this deployment (--served-zones); it needs no other deployment", z)
		}
	}
	if len(c.Zones.Deployments) > 0 && c.Zones.ServesAll() {
		p.Addf("zone-deployments", "needs --served-zones: a deployment serving every zone sends no request elsewhere")
	}
	if c.DefaultZone != "" && !c.Zones.Serves(c.DefaultZone) {
		p.Addf("registration-default-zone", "%q is not one of --served-zones %v", c.DefaultZone, c.Zones.Served)
	}
}

// DefaultQueueConfig returns the backoff defaults.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{BackoffBase: time.Second, BackoffMax: 5 * time.Minute}
}

// AddFlags binds the configuration to flags.
func (c *QueueConfig) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.BackoffBase, "reconcile-backoff-base", c.BackoffBase, "wait after a failed reconcile; it doubles per attempt")
	fs.DurationVar(&c.BackoffMax, "reconcile-backoff-max", c.BackoffMax, "longest wait between failed reconciles")
}

// Validate reports every invalid setting, naming its flag.
func (c QueueConfig) Validate() error {
	var p config.Problems
	if c.BackoffBase <= 0 {
		p.Addf("reconcile-backoff-base", "must be positive (got %s)", c.BackoffBase)
	}
	if c.BackoffMax < c.BackoffBase {
		p.Addf("reconcile-backoff-max", "must be at least --reconcile-backoff-base (got %s)", c.BackoffMax)
	}
	return p.Err()
}

// zoneDeploymentsValue is a pflag.Value of zone=URL pairs. Unlike pflag's
// map flags it takes an empty value (an unset template parameter) as no pairs.
type zoneDeploymentsValue struct{ m *map[string]string }

func (v zoneDeploymentsValue) String() string {
	pairs := make([]string, 0, len(*v.m))
	for _, z := range slices.Sorted(maps.Keys(*v.m)) {
		pairs = append(pairs, z+"="+(*v.m)[z])
	}
	return "[" + joinComma(pairs) + "]"
}

func (v zoneDeploymentsValue) Set(s string) error {
	m := map[string]string{}
	for _, pair := range splitComma(s) {
		zone, addr, ok := strings.Cut(pair, "=")
		zone, addr = strings.TrimSpace(zone), strings.TrimSpace(addr)
		if !ok || zone == "" || addr == "" {
			return fmt.Errorf("%q must be zone=URL", pair)
		}
		if _, dup := m[zone]; dup {
			return fmt.Errorf("zone %s is given twice", zone)
		}
		m[zone] = addr
	}
	*v.m = m
	return nil
}

func (v zoneDeploymentsValue) Type() string { return "zone=URL,..." }
