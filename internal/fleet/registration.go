package fleet

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Product is the kind of cluster a registration is for.
type Product string

// The products a cluster can be.
const (
	ProductOCP        Product = "OCP"
	ProductROSA       Product = "ROSA"
	ProductOSD        Product = "OSD"
	ProductARO        Product = "ARO"
	ProductROKS       Product = "ROKS"
	ProductEKS        Product = "EKS"
	ProductAKS        Product = "AKS"
	ProductGKE        Product = "GKE"
	ProductKubernetes Product = "Kubernetes"
)

// Products lists every product, in the API's order.
func Products() []Product {
	return []Product{ProductOCP, ProductROSA, ProductOSD, ProductARO, ProductROKS, ProductEKS, ProductAKS, ProductGKE, ProductKubernetes}
}

// Registration conditions (ARCHITECTURE.md section 4).
const (
	ConditionAccepted  = "Accepted"
	ConditionPlaced    = "Placed"
	ConditionDelivered = "Delivered"
	ConditionJoined    = "Joined"
	ConditionAvailable = "Available"
)

// Condition reasons the service sets.
const (
	ReasonValidated       = "Validated"
	ReasonHubSelected     = "HubSelected"
	ReasonNoHubAvailable  = "NoHubAvailable"
	ReasonPublished       = "PublishedToAgent"
	ReasonAcknowledged    = "AcknowledgedByAgent"
	ReasonDeliveryPending = "DeliveryModeUnavailable"
	ReasonDeliveryFailed  = "DeliveryFailed"
	ReasonWithdrawing     = "Withdrawing"
	ReasonRemoved         = "Removed"
	ReasonForcedRemoval   = "RemovalNotConfirmed"
	ReasonAwaitingAgent   = "AwaitingAgentReport"
	ReasonNotPlaced       = "NotPlaced"
)

// Registration is a cluster registered by an organisation: what it asked for,
// where it was placed and what is known of it.
type Registration struct {
	ID    string
	OrgID string
	// Owner is the user name of who registered it, its created_by: an
	// organisation's members change and deregister only their own.
	Owner          string
	Name           string
	DisplayName    string
	Labels         map[string]string
	Zone           string
	Region         string
	Product        Product
	HasCredentials bool
	Hub            *HubRef
	// DeliveredVia is the delivery mode that holds the registration's objects
	// on its hub ("" before the first delivery); it differs from the hub's
	// mode while a hub moves from a SyncSet to its agent.
	DeliveredVia DeliveryMode
	Conditions   Conditions
	Phase        Phase
	// Generation moves on every change of what was asked for.
	Generation int64
	// ObservedGeneration is the generation the reconcilers last acted on.
	ObservedGeneration  int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
	DeletedAt           *time.Time
}

// HubRef names the hub a registration is placed on.
type HubRef struct {
	ID     string
	Name   string
	Zone   string
	Region string
}

// ImportCredentials let the hub import a cluster automatically: a kubeconfig,
// or an API URL and a token. They are stored encrypted and never returned.
type ImportCredentials struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	APIURL     string `json:"api_url,omitempty"`
	Token      string `json:"token,omitempty"`
}

// RegistrationCreate is what a caller asks to register.
type RegistrationCreate struct {
	Name        string
	DisplayName string
	Labels      map[string]string
	Zone        string
	Region      string
	Product     Product
	Credentials *ImportCredentials
}

// RegistrationCreateItem is one item of a batch create: what to register and
// the Idempotency-Key it is registered under ("" for none).
type RegistrationCreateItem struct {
	Create         RegistrationCreate
	IdempotencyKey string
}

// RegistrationResult is the outcome of one item of a batch create: the
// registration (Created false when its idempotency key replays an earlier
// request), or the error CreateRegistration would have returned for it.
type RegistrationResult struct {
	Registration Registration
	Created      bool
	Err          error
}

// RegistrationUpdate changes the mutable fields of a registration; nil fields
// are left alone.
type RegistrationUpdate struct {
	DisplayName *string
	Labels      *map[string]string
}

var (
	dnsLabel       = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	labelName      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`)
	labelValue     = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`)
	dnsSubdomain   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	regionOrZone   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	ocmClusterID   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)
	maxLabels      = 64
	maxDisplayName = 256
)

// reservedLabelPrefixes are label prefixes a registration or a policy body
// may not set: the fleet manager's own, and RHACM's, which steer the hub
// (cluster sets, placement, the policy framework's root-policy label, which
// would make a root Policy look like a replica) rather than describe it.
var reservedLabelPrefixes = []string{"fleet-manager.io/", "open-cluster-management.io/", "cluster.open-cluster-management.io/", "policy.open-cluster-management.io/"}

// ValidateLabels checks Kubernetes label syntax: the labels end up on the
// hub's ManagedCluster. Reserved prefixes are refused.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return Errorf(CodeValidation, "at most %d labels are allowed (got %d)", maxLabels, len(labels))
	}
	for k, v := range labels {
		for _, reserved := range reservedLabelPrefixes {
			if strings.HasPrefix(k, reserved) {
				return Errorf(CodeValidation, "labels: the key prefix %s is reserved", reserved)
			}
		}
		if err := ValidateLabelKey(k); err != nil {
			return err
		}
		if err := validateLabelValue(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ValidateLabelKey checks a label key's syntax, as the kube-apiserver's
// qualified-name rule does: an optional DNS-subdomain prefix of at most 253
// characters and a name. The error names the rule, never the key.
func ValidateLabelKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)) {
		return Errorf(CodeValidation, "a label key's prefix must be a DNS subdomain of at most 253 characters")
	}
	if !labelName.MatchString(name) {
		return Errorf(CodeValidation, "a label key's name must be 1-63 letters, digits, '-', '_' or '.', starting and ending alphanumeric")
	}
	return nil
}

// validateLabelValue checks the syntax of key's label value v. The error
// names the key, which passed ValidateLabelKey, and never the value.
func validateLabelValue(k, v string) error {
	if !labelValue.MatchString(v) {
		return Errorf(CodeValidation, "label %q: the value must be at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric", k)
	}
	return nil
}

// Validate checks a registration request; errors carry CodeValidation.
func (c RegistrationCreate) Validate() error {
	if !dnsLabel.MatchString(c.Name) {
		return Errorf(CodeValidation, "name must be a DNS label: 1-63 lower-case letters, digits or '-', starting and ending alphanumeric")
	}
	if utf8.RuneCountInString(c.DisplayName) > maxDisplayName {
		return Errorf(CodeValidation, "display_name must be at most %d characters", maxDisplayName)
	}
	if c.Zone != "" && !regionOrZone.MatchString(c.Zone) {
		return Errorf(CodeValidation, "zone must be a DNS label")
	}
	if c.Region != "" && !regionOrZone.MatchString(c.Region) {
		return Errorf(CodeValidation, "region must be a DNS label")
	}
	if !slices.Contains(Products(), c.Product) {
		return Errorf(CodeValidation, "product is not one of %v", Products())
	}
	if err := ValidateLabels(c.Labels); err != nil {
		return err
	}
	return c.Credentials.validate()
}

func (ic *ImportCredentials) validate() error {
	if ic == nil {
		return nil
	}
	hasKubeconfig, hasToken := ic.Kubeconfig != "", ic.APIURL != "" || ic.Token != ""
	switch {
	case hasKubeconfig && hasToken:
		return Errorf(CodeValidation, "credentials: give either a kubeconfig or an api_url and a token, not both")
	case !hasKubeconfig && (ic.APIURL == "" || ic.Token == ""):
		return Errorf(CodeValidation, "credentials: give a kubeconfig, or both an api_url and a token")
	case hasToken && !strings.HasPrefix(ic.APIURL, "https://"):
		return Errorf(CodeValidation, "credentials: api_url must be an https:// URL")
	}
	return nil
}

// Validate checks an update; errors carry CodeValidation.
func (u RegistrationUpdate) Validate() error {
	if u.DisplayName != nil && utf8.RuneCountInString(*u.DisplayName) > maxDisplayName {
		return Errorf(CodeValidation, "display_name must be at most %d characters", maxDisplayName)
	}
	if u.Labels != nil {
		return ValidateLabels(*u.Labels)
	}
	return nil
}

// ListQuery is a page of a list, filtered and ordered.
type ListQuery struct {
	Page    int
	Size    int
	Search  string
	OrderBy string
}

// RegistrationService registers, lists and deregisters clusters, always within
// the caller's organisation.
type RegistrationService interface {
	// CreateRegistration registers a cluster for caller. With a non-empty
	// idempotencyKey, a repeated request returns the first answer (created false).
	// Errors: CodeValidation, CodeQuotaExceeded, CodeOrgNotAllowed,
	// CodeUserNotAllowed, CodeProductNotAccepted, CodeNameTaken, CodeIdempotencyKeyReused.
	CreateRegistration(ctx context.Context, caller Identity, create RegistrationCreate, idempotencyKey string) (Registration, bool, error)
	// CreateRegistrations registers a batch of clusters for caller, each item
	// under the rules of CreateRegistration alone (validation, zone, pre-flight
	// rules, quota counted in order, taken names, its own idempotency key), and
	// answers one result per item, in order; a name an earlier item takes is
	// refused with CodeNameTaken. The items accepted are created together or
	// not at all. The error is the whole batch's: CodeOrgNotAllowed,
	// CodeUserNotAllowed, CodeActionForbidden (the caller may register
	// nothing), CodeInternal, CodeUnavailable.
	CreateRegistrations(ctx context.Context, caller Identity, items []RegistrationCreateItem) ([]RegistrationResult, error)
	// FindRegistration returns a live registration of org. Errors: CodeNotFound.
	FindRegistration(ctx context.Context, org, id string) (Registration, error)
	// ListRegistrations returns a page of org's live registrations and their
	// total. Errors: CodeBadSearch, CodeBadOrderBy.
	ListRegistrations(ctx context.Context, org string, q ListQuery) ([]Registration, int, error)
	// UpdateRegistration changes labels or display name; ifMatch, when not nil,
	// must be the current generation. Errors: CodeNotFound, CodeValidation,
	// CodePreconditionFailed, CodeConflict (deletion requested).
	UpdateRegistration(ctx context.Context, permit Permit, org, id string, ifMatch *int64, update RegistrationUpdate) (Registration, error)
	// RequestRegistrationDeletion starts deregistration; repeating it is
	// harmless. Errors: CodeNotFound.
	RequestRegistrationDeletion(ctx context.Context, permit Permit, org, id string) (Registration, error)
	// FindImportMaterial returns the import manifests of org's registration.
	// Errors: CodeNotFound (also while the hub has not made them yet).
	FindImportMaterial(ctx context.Context, permit Permit, org, id string) (string, error)
}

// ETag renders a generation as an HTTP entity tag.
func ETag(generation int64) string { return fmt.Sprintf(`"%d"`, generation) }
