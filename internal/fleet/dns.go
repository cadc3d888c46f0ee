package fleet

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// DNSProviderKind names the system a DNS zone's records are written to.
type DNSProviderKind string

// The DNS providers.
const (
	// DNSProviderRFC2136 writes by RFC 2136 dynamic updates signed with TSIG
	// (RFC 8945), to customer-managed authoritative servers.
	DNSProviderRFC2136 DNSProviderKind = "rfc2136"
	// DNSProviderRoute53 writes to an Amazon Route53 hosted zone.
	DNSProviderRoute53 DNSProviderKind = "route53"
)

// DNSProviderKinds lists the providers, in the API's order.
func DNSProviderKinds() []DNSProviderKind {
	return []DNSProviderKind{DNSProviderRFC2136, DNSProviderRoute53}
}

// DNSRecordType is the type of a service instance's record.
type DNSRecordType string

// The record types a naming policy may allow.
const (
	DNSRecordCNAME DNSRecordType = "CNAME"
	DNSRecordA     DNSRecordType = "A"
	DNSRecordAAAA  DNSRecordType = "AAAA"
)

// DNSRecordTypes lists the record types, in the API's order.
func DNSRecordTypes() []DNSRecordType {
	return []DNSRecordType{DNSRecordCNAME, DNSRecordA, DNSRecordAAAA}
}

// TSIG algorithms an RFC 2136 zone may use (RFC 8945's names, as dig and
// BIND spell them).
const (
	TSIGHMACSHA256 = "hmac-sha256"
	TSIGHMACSHA384 = "hmac-sha384"
	TSIGHMACSHA512 = "hmac-sha512"
)

// TSIGAlgorithms lists the TSIG algorithms accepted, strongest last.
func TSIGAlgorithms() []string { return []string{TSIGHMACSHA256, TSIGHMACSHA384, TSIGHMACSHA512} }

// RFC2136Settings say where and how an RFC 2136 zone is updated. The TSIG
// secret is a credential (DNSCredentials), never a setting.
type RFC2136Settings struct {
	// Server is the primary's "host:port" the updates are sent to (TCP).
	Server string `json:"server"`
	// TSIGKeyName is the key's name as the server knows it.
	TSIGKeyName string `json:"tsig_key_name"`
	// TSIGAlgorithm is one of TSIGAlgorithms.
	TSIGAlgorithm string `json:"tsig_algorithm"`
}

// Route53Settings name a Route53 hosted zone.
type Route53Settings struct {
	HostedZoneID string `json:"hosted_zone_id"`
	// Region signs the requests (Route53 is global; its signing region is
	// us-east-1 unless a partition says otherwise).
	Region string `json:"region,omitempty"`
	// Endpoint replaces the service's address (a VPC endpoint, a partition's,
	// or an emulator's in tests); empty for the SDK's default.
	Endpoint string `json:"endpoint,omitempty"`
}

// DNSCredentials are a zone's secrets, sealed at rest and never returned:
// the TSIG secret of an RFC 2136 zone, or an access key of a Route53 zone
// (none: the deployment's own AWS credentials, as the SDK finds them).
type DNSCredentials struct {
	// TSIGSecret is the key's base64 secret.
	TSIGSecret      string `json:"tsig_secret,omitempty"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
}

// DNSZone is a DNS zone the fleet manager writes service instances'
// records into, with the provider that holds it.
type DNSZone struct {
	ID string
	// Name is the zone's apex, lowercase, without the final dot.
	Name     string
	Provider DNSProviderKind
	RFC2136  *RFC2136Settings
	Route53  *Route53Settings
	// Nameservers are the "host:port" of the zone's authoritative servers
	// that Resolvable is checked against; empty for the provider's own
	// (the RFC 2136 server; a Route53 hosted zone's delegation set).
	Nameservers    []string
	HasCredentials bool
	Generation     int64
	// Services counts the zone's live naming policies.
	Services  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// DNSZoneCreate is what an administrator onboards.
type DNSZoneCreate struct {
	Name        string
	Provider    DNSProviderKind
	RFC2136     *RFC2136Settings
	Route53     *Route53Settings
	Nameservers []string
	Credentials *DNSCredentials
}

// DNSZoneUpdate changes a zone; nil fields are left alone. The provider and
// the name never change: a new zone is onboarded instead.
type DNSZoneUpdate struct {
	RFC2136     *RFC2136Settings
	Route53     *Route53Settings
	Nameservers *[]string
	Credentials *DNSCredentials
}

// Limits of the DNS API's inputs.
const (
	maxDNSName        = 253
	maxDNSNameservers = 8
	maxDNSTargets     = 8
	maxDNSWriters     = 100
	// maxDNSTemplate bounds a name template.
	maxDNSTemplate = 128
	// DNSMinTTL and DNSMaxTTL bound every policy's TTLs.
	DNSMinTTL = 5
	DNSMaxTTL = 86400
	// DNSDefaultTTL is a policy's default TTL when it names none.
	DNSDefaultTTL = 300
	// DNSInstancePlaceholder is the name template's one placeholder.
	DNSInstancePlaceholder = "{instance}"
	// DNSOwnerLabel is the first label of the name of a record's ownership
	// record, the TXT that says which deployment and record own the name
	// (internal/dnsprovider): a record's name leaves room for it.
	DNSOwnerLabel = "_fleet-owner"
)

// NormalizeDNSName lowercases a domain name and drops its final dot.
func NormalizeDNSName(s string) string { return strings.TrimSuffix(strings.ToLower(s), ".") }

// ValidDNSName reports whether s (normalized) is a host name of DNS labels,
// at least two of them when apex is set.
func ValidDNSName(s string) bool {
	if s == "" || len(s) > maxDNSName {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !dnsLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// DNSNameWithin reports whether name is sub or below it.
func DNSNameWithin(name, sub string) bool { return name == sub || strings.HasSuffix(name, "."+sub) }

func validateHostPort(field, hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" || port == "" || strings.ContainsAny(host, "/@ ") {
		return Errorf(CodeValidation, "%s must be host:port", field)
	}
	return nil
}

func (s *RFC2136Settings) validate() error {
	if s == nil {
		return Errorf(CodeValidation, "rfc2136 (server, tsig_key_name, tsig_algorithm) is required for provider rfc2136")
	}
	if err := validateHostPort("rfc2136.server", s.Server); err != nil {
		return err
	}
	if !ValidDNSName(NormalizeDNSName(s.TSIGKeyName)) {
		return Errorf(CodeValidation, "rfc2136.tsig_key_name must be a domain name")
	}
	if !slices.Contains(TSIGAlgorithms(), s.TSIGAlgorithm) {
		return Errorf(CodeValidation, "rfc2136.tsig_algorithm is not one of %v", TSIGAlgorithms())
	}
	return nil
}

func (s *Route53Settings) validate() error {
	if s == nil || s.HostedZoneID == "" || len(s.HostedZoneID) > 32 || strings.ContainsFunc(s.HostedZoneID, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		return Errorf(CodeValidation, "route53.hosted_zone_id must be a hosted zone's id (upper-case letters and digits)")
	}
	if s.Region != "" && !regionOrZone.MatchString(s.Region) {
		return Errorf(CodeValidation, "route53.region must be a region name")
	}
	if s.Endpoint != "" {
		if err := validateServiceURL("route53.endpoint", s.Endpoint, true); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks credentials against the provider; the error never holds a value.
func (c *DNSCredentials) Validate(p DNSProviderKind) error {
	if c == nil {
		return nil
	}
	switch p {
	case DNSProviderRFC2136:
		if c.AccessKeyID != "" || c.SecretAccessKey != "" {
			return Errorf(CodeValidation, "credentials: an rfc2136 zone takes tsig_secret only")
		}
		if b, err := base64.StdEncoding.DecodeString(c.TSIGSecret); err != nil || len(b) < 16 || len(b) > 512 {
			return Errorf(CodeValidation, "credentials.tsig_secret must be a base64 key of 16 to 512 bytes")
		}
	case DNSProviderRoute53:
		if c.TSIGSecret != "" {
			return Errorf(CodeValidation, "credentials: a route53 zone takes access_key_id and secret_access_key only")
		}
		if len(c.AccessKeyID) < 16 || len(c.AccessKeyID) > 128 || len(c.SecretAccessKey) < 16 || len(c.SecretAccessKey) > 256 ||
			strings.ContainsFunc(c.AccessKeyID+c.SecretAccessKey, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return Errorf(CodeValidation, "credentials: access_key_id and secret_access_key must both be given, printable, of AWS's lengths")
		}
	}
	return nil
}

func validateNameservers(ns []string) error {
	if len(ns) > maxDNSNameservers {
		return Errorf(CodeValidation, "nameservers may name at most %d servers", maxDNSNameservers)
	}
	for i, n := range ns {
		if err := validateHostPort(fmt.Sprintf("nameservers[%d]", i), n); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a zone to onboard; errors carry CodeValidation.
func (c DNSZoneCreate) Validate() error {
	name := NormalizeDNSName(c.Name)
	if !ValidDNSName(name) || !strings.Contains(name, ".") {
		return Errorf(CodeValidation, "name must be a domain name of at least two labels")
	}
	switch c.Provider {
	case DNSProviderRFC2136:
		if c.Route53 != nil {
			return Errorf(CodeValidation, "route53 settings are for provider route53")
		}
		if err := c.RFC2136.validate(); err != nil {
			return err
		}
		if c.Credentials == nil {
			return Errorf(CodeValidation, "credentials.tsig_secret is required for provider rfc2136")
		}
	case DNSProviderRoute53:
		if c.RFC2136 != nil {
			return Errorf(CodeValidation, "rfc2136 settings are for provider rfc2136")
		}
		if err := c.Route53.validate(); err != nil {
			return err
		}
	default:
		return Errorf(CodeValidation, "provider is not one of %v", DNSProviderKinds())
	}
	if err := c.Credentials.Validate(c.Provider); err != nil {
		return err
	}
	return validateNameservers(c.Nameservers)
}

// Apply returns z with u applied, checked; errors carry CodeValidation.
func (u DNSZoneUpdate) Apply(z DNSZone) (DNSZone, error) {
	switch {
	case u.RFC2136 != nil && z.Provider != DNSProviderRFC2136:
		return z, Errorf(CodeValidation, "rfc2136 settings are for provider rfc2136")
	case u.Route53 != nil && z.Provider != DNSProviderRoute53:
		return z, Errorf(CodeValidation, "route53 settings are for provider route53")
	}
	if u.RFC2136 != nil {
		if err := u.RFC2136.validate(); err != nil {
			return z, err
		}
		z.RFC2136 = u.RFC2136
	}
	if u.Route53 != nil {
		if err := u.Route53.validate(); err != nil {
			return z, err
		}
		z.Route53 = u.Route53
	}
	if u.Nameservers != nil {
		if err := validateNameservers(*u.Nameservers); err != nil {
			return z, err
		}
		z.Nameservers = *u.Nameservers
	}
	if err := u.Credentials.Validate(z.Provider); err != nil {
		return z, err
	}
	return z, nil
}

// DNSService is a service's naming policy within a zone: the subtree its
// records live in, how an instance's name is made, who may write them, and
// which types and TTLs they may have.
type DNSService struct {
	ID string
	// Name is the service's name, a DNS label, unique in the fleet.
	Name     string
	ZoneID   string
	ZoneName string
	// Subdomain is the service's subtree relative to the zone (Subtree).
	Subdomain string
	// NameTemplate makes an instance's name relative to the subtree, with
	// DNSInstancePlaceholder where the instance goes.
	NameTemplate string
	// WriterOrgs and WriterServiceAccounts may write records (either).
	WriterOrgs            []string
	WriterServiceAccounts []string
	RecordTypes           []DNSRecordType
	MinTTL                int
	MaxTTL                int
	DefaultTTL            int
	Generation            int64
	// Records counts the service's live records.
	Records   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Subtree is the service's domain within its zone: every record of the
// service is strictly below it.
func (s DNSService) Subtree() string { return s.Subdomain + "." + s.ZoneName }

// RecordName builds an instance's record name from the policy; errors carry
// CodeValidation and never hold the instance.
func (s DNSService) RecordName(instance string) (string, error) {
	if !dnsLabel.MatchString(instance) {
		return "", Errorf(CodeValidation, "instance must be a DNS label: lowercase letters, digits and '-', at most 63")
	}
	name := strings.Replace(s.NameTemplate, DNSInstancePlaceholder, instance, 1) + "." + s.Subtree()
	if len(name) > maxDNSName-len(DNSOwnerLabel)-1 || !ValidDNSName(name) || !DNSNameWithin(name, s.Subtree()) || name == s.Subtree() {
		return "", Errorf(CodeValidation, "instance makes a name longer than DNS allows under the service's subtree")
	}
	return name, nil
}

// MayWrite reports whether subject is one of the policy's writers. Fleet
// administrators write every service's records.
func (s DNSService) MayWrite(sub Subject) bool {
	if sub.FleetAdmin {
		return true
	}
	if sub.OrgID != "" && slices.Contains(s.WriterOrgs, sub.OrgID) {
		return true
	}
	return sub.Kind == SubjectServiceAccount && sub.Username != "" && slices.Contains(s.WriterServiceAccounts, sub.Username)
}

// DNSServiceCreate is a naming policy to onboard. Zero values take the
// defaults: Subdomain the service's name, NameTemplate DNSInstancePlaceholder,
// every record type, DNSMinTTL to DNSMaxTTL with DNSDefaultTTL.
type DNSServiceCreate struct {
	Name                  string
	ZoneID                string
	Subdomain             string
	NameTemplate          string
	WriterOrgs            []string
	WriterServiceAccounts []string
	RecordTypes           []DNSRecordType
	MinTTL                int
	MaxTTL                int
	DefaultTTL            int
}

// DNSServiceUpdate changes a policy; nil fields are left alone. The zone, the
// subdomain and the template never change: the names of existing records
// are made from them.
type DNSServiceUpdate struct {
	WriterOrgs            *[]string
	WriterServiceAccounts *[]string
	RecordTypes           *[]DNSRecordType
	MinTTL                *int
	MaxTTL                *int
	DefaultTTL            *int
}

// Defaulted returns c with the defaults filled in and names normalized.
func (c DNSServiceCreate) Defaulted() DNSServiceCreate {
	if c.Subdomain == "" {
		c.Subdomain = c.Name
	}
	c.Subdomain = NormalizeDNSName(c.Subdomain)
	if c.NameTemplate == "" {
		c.NameTemplate = DNSInstancePlaceholder
	}
	if len(c.RecordTypes) == 0 {
		c.RecordTypes = DNSRecordTypes()
	}
	if c.MinTTL == 0 {
		c.MinTTL = DNSMinTTL
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DNSMaxTTL
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = min(max(DNSDefaultTTL, c.MinTTL), c.MaxTTL)
	}
	return c
}

// Validate checks a defaulted policy (Defaulted); errors carry CodeValidation.
func (c DNSServiceCreate) Validate() error {
	if len(c.Name) > 40 || !dnsLabel.MatchString(c.Name) {
		return Errorf(CodeValidation, "name must be a DNS label of at most 40 characters")
	}
	if c.ZoneID == "" {
		return Errorf(CodeValidation, "zone_id is required")
	}
	if !ValidDNSName(c.Subdomain) {
		return Errorf(CodeValidation, "subdomain must be one or more DNS labels")
	}
	if err := validateNameTemplate(c.NameTemplate); err != nil {
		return err
	}
	s := DNSService{WriterOrgs: c.WriterOrgs, WriterServiceAccounts: c.WriterServiceAccounts, RecordTypes: c.RecordTypes,
		MinTTL: c.MinTTL, MaxTTL: c.MaxTTL, DefaultTTL: c.DefaultTTL}
	return s.validateRules()
}

func validateNameTemplate(t string) error {
	if len(t) > maxDNSTemplate || strings.Count(t, DNSInstancePlaceholder) != 1 {
		return Errorf(CodeValidation, "name_template must hold %s once, at most %d characters", DNSInstancePlaceholder, maxDNSTemplate)
	}
	// Made with a one-letter instance, the template must give DNS labels.
	if !ValidDNSName(strings.Replace(t, DNSInstancePlaceholder, "x", 1)) {
		return Errorf(CodeValidation, "name_template must make DNS labels: lowercase letters, digits, '-' and '.' around %s", DNSInstancePlaceholder)
	}
	return nil
}

func (s DNSService) validateRules() error {
	switch {
	case len(s.WriterOrgs) > maxDNSWriters || len(s.WriterServiceAccounts) > maxDNSWriters:
		return Errorf(CodeValidation, "writer_organizations and writer_service_accounts may hold at most %d entries each", maxDNSWriters)
	case slices.ContainsFunc(append(slices.Clone(s.WriterOrgs), s.WriterServiceAccounts...), func(w string) bool {
		return w == "" || len(w) > 256 || strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f })
	}):
		return Errorf(CodeValidation, "writers must be non-empty printable names of at most 256 characters")
	case len(s.RecordTypes) == 0 || slices.ContainsFunc(s.RecordTypes, func(t DNSRecordType) bool { return !slices.Contains(DNSRecordTypes(), t) }):
		return Errorf(CodeValidation, "record_types must be some of %v", DNSRecordTypes())
	case s.MinTTL < DNSMinTTL || s.MaxTTL > DNSMaxTTL || s.MinTTL > s.MaxTTL || s.DefaultTTL < s.MinTTL || s.DefaultTTL > s.MaxTTL:
		return Errorf(CodeValidation, "TTLs need %d <= min_ttl <= default_ttl <= max_ttl <= %d", DNSMinTTL, DNSMaxTTL)
	}
	return nil
}

// Apply returns s with u applied, checked; errors carry CodeValidation.
func (u DNSServiceUpdate) Apply(s DNSService) (DNSService, error) {
	if u.WriterOrgs != nil {
		s.WriterOrgs = *u.WriterOrgs
	}
	if u.WriterServiceAccounts != nil {
		s.WriterServiceAccounts = *u.WriterServiceAccounts
	}
	if u.RecordTypes != nil {
		s.RecordTypes = *u.RecordTypes
	}
	for dst, v := range map[*int]*int{&s.MinTTL: u.MinTTL, &s.MaxTTL: u.MaxTTL, &s.DefaultTTL: u.DefaultTTL} {
		if v != nil {
			*dst = *v
		}
	}
	return s, s.validateRules()
}

// DNSSubtreesOverlap reports whether two services' subtrees overlap: one is
// the other or below it, so their records could collide.
func DNSSubtreesOverlap(a, b string) bool { return DNSNameWithin(a, b) || DNSNameWithin(b, a) }

// The conditions of a DNS record.
const (
	// DNSConditionAccepted: the record passed its service's policy.
	DNSConditionAccepted = "Accepted"
	// DNSConditionPublished: the provider accepted the record's current
	// generation (or, while deleting, its removal).
	DNSConditionPublished = "Published"
	// DNSConditionResolvable: the zone's authoritative servers answer the
	// record's current values.
	DNSConditionResolvable = "Resolvable"
)

// Reasons of a DNS record's conditions.
const (
	DNSReasonAccepted            = "Accepted"
	DNSReasonPending             = "Pending"
	DNSReasonPublished           = "Published"
	DNSReasonWaitingForCluster   = "WaitingForClusterIngress"
	DNSReasonClusterGone         = "ClusterGone"
	DNSReasonProviderUnavailable = "ProviderUnavailable"
	DNSReasonProviderRefused     = "ProviderRefused"
	DNSReasonAnswered            = "Answered"
	DNSReasonNotAnswered         = "NotYetAnswered"
	DNSReasonNameserverError     = "NameserverUnreachable"
	// DNSReasonNameOwnedElsewhere: the name holds records this deployment
	// does not own (another owner's ownership record, or records in the
	// way without one); they are left alone.
	DNSReasonNameOwnedElsewhere = "NameOwnedElsewhere"
)

// The phases of a DNS record, derived from its conditions (DNSRecordPhase).
const (
	DNSPhasePending   = "pending"
	DNSPhasePublished = "published"
	DNSPhaseReady     = "ready"
	DNSPhaseFailed    = "failed"
	DNSPhaseDeleting  = "deleting"
)

// DNSRecordPhases lists the phases, in the API's order.
func DNSRecordPhases() []string {
	return []string{DNSPhasePending, DNSPhasePublished, DNSPhaseReady, DNSPhaseFailed, DNSPhaseDeleting}
}

// DNSRecordPhase derives a record's phase from its conditions.
func DNSRecordPhase(cs Conditions, deletionRequested bool) string {
	switch {
	case deletionRequested:
		return DNSPhaseDeleting
	case cs.Status(DNSConditionPublished) == ConditionFalse && slices.Contains([]string{DNSReasonProviderRefused, DNSReasonClusterGone,
		DNSReasonNameOwnedElsewhere}, cs.Reason(DNSConditionPublished)):
		return DNSPhaseFailed
	case !cs.IsTrue(DNSConditionPublished):
		return DNSPhasePending
	case !cs.IsTrue(DNSConditionResolvable):
		return DNSPhasePublished
	default:
		return DNSPhaseReady
	}
}

// DNSRecord is a service instance's record.
type DNSRecord struct {
	ID          string
	ServiceID   string
	ServiceName string
	ZoneID      string
	OrgID       string
	CreatedBy   string
	Instance    string
	// Name is the record's domain name, made by its service's policy.
	Name string
	Type DNSRecordType
	TTL  int
	// Targets are the record's values: one host name for a CNAME, addresses
	// for A and AAAA. Empty when ClusterID names the target.
	Targets []string
	// ClusterID names a capacity pool's cluster of the record's organisation
	// whose ingress router the CNAME follows.
	ClusterID  string
	Generation int64
	// Values are what the record now resolves to as the provider holds it
	// (the published generation's), empty before the first publication.
	Values              []string
	Conditions          Conditions
	CreatedAt           time.Time
	UpdatedAt           time.Time
	DeletionRequestedAt *time.Time
}

// Phase of a record, derived from its conditions (DNSRecordPhase).
func (r DNSRecord) Phase() string { return DNSRecordPhase(r.Conditions, r.DeletionRequestedAt != nil) }

// DNSRecordCreate asks for an instance's record. TTL 0 takes the policy's
// default; Type empty is CNAME.
type DNSRecordCreate struct {
	Instance  string
	Type      DNSRecordType
	TTL       int
	Targets   []string
	ClusterID string
}

// DNSRecordUpdate changes a record's target or TTL; nil fields are left
// alone. Giving Targets clears ClusterID and the other way round.
type DNSRecordUpdate struct {
	Type      *DNSRecordType
	TTL       *int
	Targets   *[]string
	ClusterID *string
}

// Validate checks a record against its service's policy; errors carry
// CodeValidation and name the field, never its value.
func (c DNSRecordCreate) Validate(s DNSService) (DNSRecordCreate, error) {
	if c.Type == "" {
		c.Type = DNSRecordCNAME
	}
	if c.TTL == 0 {
		c.TTL = s.DefaultTTL
	}
	if _, err := s.RecordName(c.Instance); err != nil {
		return c, err
	}
	if !slices.Contains(s.RecordTypes, c.Type) {
		return c, Errorf(CodeValidation, "type must be one of the service's record types %v", s.RecordTypes)
	}
	if c.TTL < s.MinTTL || c.TTL > s.MaxTTL {
		return c, Errorf(CodeValidation, "ttl must be %d to %d seconds", s.MinTTL, s.MaxTTL)
	}
	return c, validateDNSTargets(c.Type, c.Targets, c.ClusterID)
}

// Apply returns r's request with u applied, checked against s.
func (u DNSRecordUpdate) Apply(r DNSRecord, s DNSService) (DNSRecordCreate, error) {
	c := DNSRecordCreate{Instance: r.Instance, Type: r.Type, TTL: r.TTL, Targets: r.Targets, ClusterID: r.ClusterID}
	if u.Type != nil {
		c.Type = *u.Type
	}
	if u.TTL != nil {
		c.TTL = *u.TTL
	}
	if u.Targets != nil {
		c.Targets, c.ClusterID = *u.Targets, ""
	}
	if u.ClusterID != nil {
		c.ClusterID = *u.ClusterID
		if u.Targets == nil {
			c.Targets = nil
		}
	}
	if c.TTL == 0 {
		return c, Errorf(CodeValidation, "ttl must be %d to %d seconds", s.MinTTL, s.MaxTTL)
	}
	return c.Validate(s)
}

func validateDNSTargets(t DNSRecordType, targets []string, clusterID string) error {
	switch {
	case clusterID != "" && len(targets) > 0:
		return Errorf(CodeValidation, "give either targets or cluster_id, not both")
	case clusterID != "" && t != DNSRecordCNAME:
		return Errorf(CodeValidation, "cluster_id makes a CNAME: type must be CNAME")
	case clusterID != "":
		if len(clusterID) > 64 || !dnsLabel.MatchString(clusterID) {
			return Errorf(CodeValidation, "cluster_id must be a pool cluster's id")
		}
		return nil
	case len(targets) == 0 || len(targets) > maxDNSTargets:
		return Errorf(CodeValidation, "targets must hold 1 to %d values (or give cluster_id)", maxDNSTargets)
	}
	seen := map[string]bool{}
	for i, v := range targets {
		if seen[v] {
			return Errorf(CodeValidation, "targets[%d] repeats a value", i)
		}
		seen[v] = true
		switch t {
		case DNSRecordCNAME:
			if len(targets) != 1 || !ValidDNSName(NormalizeDNSName(v)) || !strings.Contains(v, ".") {
				return Errorf(CodeValidation, "a CNAME's targets must be one host name of at least two labels")
			}
		case DNSRecordA, DNSRecordAAAA:
			a, err := netip.ParseAddr(v)
			if err != nil || a.Zone() != "" || (t == DNSRecordA) != a.Is4() || a.Is4In6() {
				return Errorf(CodeValidation, "targets[%d] must be an IPv%s address", i, map[bool]string{true: "4", false: "6"}[t == DNSRecordA])
			}
			if a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsLinkLocalMulticast() {
				return Errorf(CodeValidation, "targets[%d] must be a routable address: not unspecified, loopback, link-local or multicast", i)
			}
		}
	}
	return nil
}

// DNSRecordSet is one name's records of one type at a provider.
type DNSRecordSet struct {
	Name   string        `json:"name"`
	Type   DNSRecordType `json:"type"`
	TTL    int           `json:"ttl"`
	Values []string      `json:"values"`
}

// Equal reports whether two sets hold the same records (values in any order).
func (a DNSRecordSet) Equal(b DNSRecordSet) bool {
	if a.Name != b.Name || a.Type != b.Type || a.TTL != b.TTL || len(a.Values) != len(b.Values) {
		return false
	}
	x, y := slices.Clone(a.Values), slices.Clone(b.Values)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// DNSChange is one record's change in a zone's batch: Upsert makes the name
// hold exactly Set (replacing Previous, whatever its type); Delete (Upsert
// nil) removes Previous.
type DNSChange struct {
	RecordID string
	Upsert   *DNSRecordSet
	// Previous is what the provider holds for the name as the fleet manager
	// last published it; nil when nothing was.
	Previous *DNSRecordSet
}

// DNSZoneAccess is a zone with its unsealed credentials, what a provider
// needs to write to it.
type DNSZoneAccess struct {
	Zone        DNSZone
	Credentials DNSCredentials
}

// DNSRefusal is a provider's refusal of a batch because of its content (a
// record the zone cannot hold, a key that may not write the name): sending
// it again fails again. Any other error of a provider is transient.
type DNSRefusal struct {
	// Reason is the provider's answer, without credentials.
	Reason string
	// Conflicts, when set, are the batch's changes refused because their
	// name holds records the deployment does not own, by record id, with
	// why. The batch's other changes are not taken: the caller sends them
	// again without these (one a provider made already is found its own
	// and written again, never twice).
	Conflicts map[string]string
}

func (e *DNSRefusal) Error() string { return "the DNS provider refused the change: " + e.Reason }

// DNSProvider writes records to the zones of one provider kind.
type DNSProvider interface {
	// Apply sends changes to zone at once (atomically where the provider
	// does) and returns the provider's change id to follow with Synced ("" when
	// the change is in place on return). A *DNSRefusal error is the batch's
	// content at fault; other errors are transient.
	Apply(ctx context.Context, zone DNSZoneAccess, changes []DNSChange) (changeID string, err error)
	// Synced reports whether the change changeID reached the provider's
	// authoritative servers.
	Synced(ctx context.Context, zone DNSZoneAccess, changeID string) (bool, error)
	// Nameservers returns the "host:port" of the zone's authoritative
	// servers, for a zone that names none.
	Nameservers(ctx context.Context, zone DNSZoneAccess) ([]string, error)
}

// DNSResolver asks authoritative servers for a name's records, without
// recursion.
type DNSResolver interface {
	// Lookup asks server for name's records of type t; it returns the
	// values (host names lowercase without the final dot) and false when the
	// name has none of that type. An error is a server that did not answer.
	Lookup(ctx context.Context, server, name string, t DNSRecordType) ([]string, bool, error)
}

// DNSWork is one claimed record, with what dns_mgr needs to decide.
type DNSWork struct {
	Record DNSRecord
	// Published is the set the provider holds as last published (nil when
	// nothing is).
	Published *DNSRecordSet
	// PublishedGeneration is the generation Published was made from.
	PublishedGeneration int64
	// ChangeID is a published change not known to be synced yet.
	ChangeID string
	// IngressHost is the target of a record that follows a cluster: its
	// ingress router's host name, "" while the cluster's URL is unknown.
	IngressHost string
	// ClusterGone is set when the cluster the record follows is no longer
	// a live pool cluster of its organisation.
	ClusterGone bool
	// Attempts counts the record's failed passes since its last success.
	Attempts int
}

// DNSZoneClaim is a zone dns_mgr holds until its lease ends, with its
// records due for a pass.
type DNSZoneClaim struct {
	Token   string
	Zone    DNSZoneAccess
	Records []DNSWork
	// Attempts counts the zone's failed passes (provider outages) since its
	// last success.
	Attempts int
}

// DNSOutcome is what a pass decided for one claimed record.
type DNSOutcome struct {
	ID         string
	Generation int64
	Conditions Conditions
	// Published, when Publish is set, replaces what the provider holds
	// (nil: nothing), made from PublishedGeneration, with ChangeID.
	Publish             bool
	Published           *DNSRecordSet
	PublishedGeneration int64
	ChangeID            string
	// Synced clears ChangeID.
	Synced bool
	// RequeueAfter asks for another pass after this long; 0 waits for a
	// wake-up. dns_mgr sets it for a failed pass too: it owns the backoff.
	RequeueAfter time.Duration
	// Failed counts the pass as failed: the record's attempts go up.
	Failed bool
	// Delete soft-deletes the record: its removal was published.
	Delete bool
}

// DNSQueue is dns_mgr's view of the records.
type DNSQueue interface {
	// ClaimDNSZones leases up to limit zones that have records due (or are
	// named in woken) and reads up to batch of each one's due records. Each
	// zone's token is owner, "/" and a uuid of its own.
	ClaimDNSZones(ctx context.Context, owner string, woken []string, limit, batch int, lease time.Duration) ([]DNSZoneClaim, error)
	// ReleaseDNSZones frees the zones that still hold a claim whose owner
	// was token (a claim whose answer was lost), and returns how many.
	ReleaseDNSZones(ctx context.Context, token string) (int, error)
	// CompleteDNSZone records a pass's outcomes and releases the claim;
	// zoneErr, when set, is a provider outage: the zone backs off and the
	// outcomes still apply. False when the claim was lost (nothing written).
	CompleteDNSZone(ctx context.Context, claim DNSZoneClaim, outcomes []DNSOutcome, zoneErr error) (bool, error)
}

// DNSAdmin onboards zones and naming policies (fleet administrators).
type DNSAdmin interface {
	// CreateDNSZone onboards a zone. Errors: CodeValidation, CodeNameTaken
	// (a zone of that name, or one that holds it or is held by it).
	CreateDNSZone(ctx context.Context, caller Identity, create DNSZoneCreate) (DNSZone, error)
	ListDNSZones(ctx context.Context, q ListQuery) ([]DNSZone, int, error)
	FindDNSZone(ctx context.Context, id string) (DNSZone, error)
	// UpdateDNSZone changes a zone under If-Match. Errors: CodeNotFound,
	// CodeValidation, CodePreconditionFailed.
	UpdateDNSZone(ctx context.Context, id string, match *int64, update DNSZoneUpdate) (DNSZone, error)
	// DeleteDNSZone deletes a zone without services. Errors: CodeNotFound,
	// CodePreconditionFailed, CodeConflict.
	DeleteDNSZone(ctx context.Context, id string, match *int64) error
	// CreateDNSService onboards a naming policy. Errors: CodeValidation,
	// CodeNotFound (zone), CodeNameTaken (the name, or a subtree that
	// overlaps another service's).
	CreateDNSService(ctx context.Context, caller Identity, create DNSServiceCreate) (DNSService, error)
	ListDNSServices(ctx context.Context, q ListQuery) ([]DNSService, int, error)
	FindDNSService(ctx context.Context, id string) (DNSService, error)
	// UpdateDNSService changes a policy under If-Match; existing records
	// keep their type and TTL. Errors: CodeNotFound, CodeValidation,
	// CodePreconditionFailed.
	UpdateDNSService(ctx context.Context, id string, match *int64, update DNSServiceUpdate) (DNSService, error)
	// DeleteDNSService deletes a policy without live records. Errors:
	// CodeNotFound, CodePreconditionFailed, CodeConflict.
	DeleteDNSService(ctx context.Context, id string, match *int64) error
}

// DNSRecords keeps service instances' records (the public API). A record
// belongs to the organisation that created it; reads are scoped to it.
type DNSRecords interface {
	// FindDNSServiceByName returns a live policy. Errors: CodeNotFound.
	FindDNSServiceByName(ctx context.Context, name string) (DNSService, error)
	// CreateDNSRecord creates an instance's record of the service named
	// service, or returns the live one with the same instance, type, TTL
	// and target (created false). The service is read, and the caller
	// checked against its writers, inside the write. Errors: CodeNotFound
	// (the service, the cluster), CodeDNSWriterNotAllowed, CodeValidation,
	// CodeNameTaken (the instance's name holds another record).
	CreateDNSRecord(ctx context.Context, caller Identity, service string, create DNSRecordCreate) (DNSRecord, bool, error)
	ListDNSRecords(ctx context.Context, org string, service DNSService, q ListQuery) ([]DNSRecord, int, error)
	FindDNSRecord(ctx context.Context, org string, service DNSService, id string) (DNSRecord, error)
	// UpdateDNSRecord changes a record's target or TTL under If-Match,
	// checked, as the caller's writing, against the service as the write
	// reads it. Errors: CodeNotFound, CodeDNSWriterNotAllowed,
	// CodeValidation, CodePreconditionFailed, CodeConflict (being deleted).
	UpdateDNSRecord(ctx context.Context, permit Permit, org string, service string, id string, match *int64, update DNSRecordUpdate) (DNSRecord, error)
	// RequestDNSRecordDeletion starts a record's removal; the row goes once
	// the provider removed the name. Errors: CodeNotFound,
	// CodeDNSWriterNotAllowed, CodePreconditionFailed.
	RequestDNSRecordDeletion(ctx context.Context, permit Permit, org string, service string, id string, match *int64) error
}

// Desired is the set w's record wants at its provider for its current
// generation; nil with the Published condition's reason while the cluster
// it follows has no known ingress, or is gone.
func (w DNSWork) Desired() (*DNSRecordSet, string) {
	r := w.Record
	values := r.Targets
	if r.ClusterID != "" {
		switch {
		case w.ClusterGone:
			return nil, DNSReasonClusterGone
		case w.IngressHost == "":
			return nil, DNSReasonWaitingForCluster
		}
		values = []string{w.IngressHost}
	}
	if r.Type == DNSRecordCNAME {
		values = []string{NormalizeDNSName(values[0])}
	}
	return &DNSRecordSet{Name: r.Name, Type: r.Type, TTL: r.TTL, Values: slices.Clone(values)}, ""
}
