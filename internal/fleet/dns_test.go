package fleet_test

import (
	"strings"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func testService(t *testing.T, create fleet.DNSServiceCreate) fleet.DNSService {
	t.Helper()
	c := create.Defaulted()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", c, err)
	}
	return fleet.DNSService{Name: c.Name, ZoneID: c.ZoneID, ZoneName: "apps.example.com", Subdomain: c.Subdomain,
		NameTemplate: c.NameTemplate, WriterOrgs: c.WriterOrgs, WriterServiceAccounts: c.WriterServiceAccounts,
		RecordTypes: c.RecordTypes, MinTTL: c.MinTTL, MaxTTL: c.MaxTTL, DefaultTTL: c.DefaultTTL}
}

// TestDNSRecordNamesStayInTheSubtree checks that a name is made from the
// policy and that nothing an instance holds leaves the service's subtree.
func TestDNSRecordNamesStayInTheSubtree(t *testing.T) {
	t.Parallel()
	s := testService(t, fleet.DNSServiceCreate{Name: "kafka", ZoneID: "z1"})
	if name, err := s.RecordName("broker-1"); err != nil || name != "broker-1.kafka.apps.example.com" {
		t.Errorf("RecordName(broker-1) = %q, %v", name, err)
	}
	tmpl := testService(t, fleet.DNSServiceCreate{Name: "db", ZoneID: "z1", Subdomain: "data.db", NameTemplate: "{instance}-rw.eu"})
	if name, err := tmpl.RecordName("pg7"); err != nil || name != "pg7-rw.eu.data.db.apps.example.com" {
		t.Errorf("RecordName(pg7) with a template = %q, %v", name, err)
	}
	for _, bad := range []string{"", "a.b", "..", "UPPER", "-x", "x-", "a/b", "*", "@", "a b", strings.Repeat("a", 64),
		"evil.example.org", "x\x00"} {
		name, err := s.RecordName(bad)
		if fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("RecordName(%q) = %q, %v; want CodeValidation", bad, name, err)
		}
		if err != nil && bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("RecordName(%q)'s error echoes the instance: %v", bad, err)
		}
	}
	long := testService(t, fleet.DNSServiceCreate{Name: "long", ZoneID: "z1", Subdomain: strings.Repeat("s", 63) + "." + strings.Repeat("t", 63),
		NameTemplate: strings.Repeat("u", 60) + ".{instance}"})
	if _, err := long.RecordName(strings.Repeat("i", 63)); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("a name past 253 characters: err = %v, want CodeValidation", err)
	}
	// A name must leave room for its ownership record's label: 253
	// characters fit DNS, not "_fleet-owner." before them.
	room := testService(t, fleet.DNSServiceCreate{Name: "room", ZoneID: "z1", Subdomain: strings.Repeat("s", 63) + "." + strings.Repeat("t", 63),
		NameTemplate: strings.Repeat("u", 40) + ".{instance}"})
	// u40.i60.s63.t63.apps.example.com: 246 characters.
	if name, err := room.RecordName(strings.Repeat("i", 60)); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("a name of 246 characters = %q, %v; want CodeValidation (no room for %s)", name, err, fleet.DNSOwnerLabel)
	}
}

// TestDNSServicePolicies checks a policy's defaults and refusals, and that
// overlapping subtrees are told apart from neighbours.
func TestDNSServicePolicies(t *testing.T) {
	t.Parallel()
	d := fleet.DNSServiceCreate{Name: "kafka", ZoneID: "z"}.Defaulted()
	if d.Subdomain != "kafka" || d.NameTemplate != fleet.DNSInstancePlaceholder || len(d.RecordTypes) != 3 || d.DefaultTTL != fleet.DNSDefaultTTL {
		t.Errorf("defaults = %+v", d)
	}
	for name, c := range map[string]fleet.DNSServiceCreate{
		"no placeholder":       {Name: "a", ZoneID: "z", NameTemplate: "static"},
		"two placeholders":     {Name: "a", ZoneID: "z", NameTemplate: "{instance}.{instance}"},
		"template with dots":   {Name: "a", ZoneID: "z", NameTemplate: "{instance}..x"},
		"underscore subdomain": {Name: "a", ZoneID: "z", Subdomain: "a_b.c"},
		"bad type":             {Name: "a", ZoneID: "z", RecordTypes: []fleet.DNSRecordType{"TXT"}},
		"ttl order":            {Name: "a", ZoneID: "z", MinTTL: 600, MaxTTL: 60},
		"ttl too low":          {Name: "a", ZoneID: "z", MinTTL: 1},
		"empty writer":         {Name: "a", ZoneID: "z", WriterOrgs: []string{""}},
		"no zone":              {Name: "a"},
		"bad name":             {Name: "A_b", ZoneID: "z"},
	} {
		if err := c.Defaulted().Validate(); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("%s: Validate = %v, want CodeValidation", name, err)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"kafka.apps.example.com", "kafka.apps.example.com", true},
		{"a.kafka.apps.example.com", "kafka.apps.example.com", true},
		{"kafka.apps.example.com", "xkafka.apps.example.com", false},
		{"kafka.apps.example.com", "redis.apps.example.com", false},
	} {
		if got := fleet.DNSSubtreesOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("DNSSubtreesOverlap(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// TestDNSWriters checks who may write a service's records.
func TestDNSWriters(t *testing.T) {
	t.Parallel()
	s := fleet.DNSService{WriterOrgs: []string{"org-a"}, WriterServiceAccounts: []string{"service-account-kafka"}}
	for _, tc := range []struct {
		sub  fleet.Subject
		want bool
	}{
		{fleet.Subject{Kind: fleet.SubjectUser, OrgID: "org-a"}, true},
		{fleet.Subject{Kind: fleet.SubjectUser, OrgID: "org-b"}, false},
		{fleet.Subject{Kind: fleet.SubjectServiceAccount, Username: "service-account-kafka", OrgID: "org-b"}, true},
		// A user named as the service account is not it.
		{fleet.Subject{Kind: fleet.SubjectUser, Username: "service-account-kafka", OrgID: "org-b"}, false},
		{fleet.Subject{Kind: fleet.SubjectUser, FleetAdmin: true}, true},
		{fleet.Subject{Kind: fleet.SubjectAnonymous}, false},
	} {
		if got := s.MayWrite(tc.sub); got != tc.want {
			t.Errorf("MayWrite(%+v) = %v, want %v", tc.sub, got, tc.want)
		}
	}
}

// TestDNSRecordTargets checks a record's targets against its type and
// policy.
func TestDNSRecordTargets(t *testing.T) {
	t.Parallel()
	s := testService(t, fleet.DNSServiceCreate{Name: "kafka", ZoneID: "z", RecordTypes: []fleet.DNSRecordType{fleet.DNSRecordCNAME, fleet.DNSRecordA},
		MinTTL: 30, MaxTTL: 3600})
	ok := []fleet.DNSRecordCreate{
		{Instance: "a", Targets: []string{"router-default.apps.c1.example.com"}},
		{Instance: "a", Type: fleet.DNSRecordA, Targets: []string{"192.0.2.1", "198.51.100.7"}, TTL: 30},
		{Instance: "a", ClusterID: "c1"},
	}
	for _, c := range ok {
		got, err := c.Validate(s)
		if err != nil {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
		if got.Type == "" || got.TTL == 0 {
			t.Errorf("Validate(%+v) did not default: %+v", c, got)
		}
	}
	bad := []fleet.DNSRecordCreate{
		{Instance: "a"},
		{Instance: "a", Type: fleet.DNSRecordAAAA, Targets: []string{"2001:db8::1"}},
		{Instance: "a", Type: fleet.DNSRecordA, Targets: []string{"127.0.0.1"}},
		{Instance: "a", Type: fleet.DNSRecordA, Targets: []string{"169.254.169.254"}},
		{Instance: "a", Type: fleet.DNSRecordA, Targets: []string{"2001:db8::1"}},
		{Instance: "a", Type: fleet.DNSRecordA, Targets: []string{"192.0.2.1", "192.0.2.1"}},
		{Instance: "a", Targets: []string{"a.example.com", "b.example.com"}},
		{Instance: "a", Targets: []string{"localhost"}},
		{Instance: "a", Targets: []string{"x.example.com"}, ClusterID: "c1"},
		{Instance: "a", Type: fleet.DNSRecordA, ClusterID: "c1"},
		{Instance: "a", Targets: []string{"x.example.com"}, TTL: 5},
		{Instance: "a.b", Targets: []string{"x.example.com"}},
	}
	for _, c := range bad {
		if _, err := c.Validate(s); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("Validate(%+v) = %v, want CodeValidation", c, err)
		}
	}
	r := fleet.DNSRecord{Instance: "a", Type: fleet.DNSRecordCNAME, TTL: 60, ClusterID: "c1"}
	targets := []string{"192.0.2.1"}
	a := fleet.DNSRecordA
	got, err := fleet.DNSRecordUpdate{Type: &a, Targets: &targets}.Apply(r, s)
	if err != nil || got.ClusterID != "" || got.Type != fleet.DNSRecordA {
		t.Errorf("an update to addresses = %+v, %v", got, err)
	}
}

// TestDNSRecordPhases checks the phase each set of conditions gives.
func TestDNSRecordPhases(t *testing.T) {
	t.Parallel()
	cond := func(typ string, s fleet.ConditionStatus, reason string) fleet.Condition {
		return fleet.Condition{Type: typ, Status: s, Reason: reason}
	}
	for _, tc := range []struct {
		cs       fleet.Conditions
		deleting bool
		want     string
	}{
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonPending)}, false, fleet.DNSPhasePending},
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonProviderUnavailable)}, false, fleet.DNSPhasePending},
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionFalse, fleet.DNSReasonProviderRefused)}, false, fleet.DNSPhaseFailed},
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionTrue, fleet.DNSReasonPublished)}, false, fleet.DNSPhasePublished},
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionTrue, ""), cond(fleet.DNSConditionResolvable, fleet.ConditionTrue, "")},
			false, fleet.DNSPhaseReady},
		{fleet.Conditions{cond(fleet.DNSConditionPublished, fleet.ConditionTrue, ""), cond(fleet.DNSConditionResolvable, fleet.ConditionTrue, "")},
			true, fleet.DNSPhaseDeleting},
	} {
		if got := fleet.DNSRecordPhase(tc.cs, tc.deleting); got != tc.want {
			t.Errorf("DNSRecordPhase(%v, %v) = %s, want %s", tc.cs, tc.deleting, got, tc.want)
		}
	}
}

// TestDNSZones checks a zone's onboarding checks; no error holds a secret.
func TestDNSZones(t *testing.T) {
	t.Parallel()
	secret := "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0" // base64 of 27 bytes
	good := fleet.DNSZoneCreate{Name: "Apps.Example.com.", Provider: fleet.DNSProviderRFC2136,
		RFC2136:     &fleet.RFC2136Settings{Server: "127.0.0.1:5353", TSIGKeyName: "fleet-key", TSIGAlgorithm: fleet.TSIGHMACSHA256},
		Credentials: &fleet.DNSCredentials{TSIGSecret: secret}}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(rfc2136) = %v", err)
	}
	r53 := fleet.DNSZoneCreate{Name: "apps.example.com", Provider: fleet.DNSProviderRoute53,
		Route53: &fleet.Route53Settings{HostedZoneID: "Z0123456789ABC", Endpoint: "http://127.0.0.1:4566"}}
	if err := r53.Validate(); err != nil {
		t.Fatalf("Validate(route53 without keys) = %v", err)
	}
	leaky := "AKIAEXAMPLEEXAMPLE1"
	for name, c := range map[string]fleet.DNSZoneCreate{
		"one label":      {Name: "com", Provider: fleet.DNSProviderRoute53, Route53: r53.Route53},
		"no provider":    {Name: "apps.example.com"},
		"mixed settings": {Name: "apps.example.com", Provider: fleet.DNSProviderRoute53, Route53: r53.Route53, RFC2136: good.RFC2136},
		"no tsig secret": {Name: "apps.example.com", Provider: fleet.DNSProviderRFC2136, RFC2136: good.RFC2136},
		"short tsig":     {Name: "apps.example.com", Provider: fleet.DNSProviderRFC2136, RFC2136: good.RFC2136, Credentials: &fleet.DNSCredentials{TSIGSecret: "c2hvcnQ="}},
		"bad algorithm":  {Name: "apps.example.com", Provider: fleet.DNSProviderRFC2136, RFC2136: &fleet.RFC2136Settings{Server: "h:53", TSIGKeyName: "k", TSIGAlgorithm: "hmac-md5"}, Credentials: good.Credentials},
		"half a key":     {Name: "apps.example.com", Provider: fleet.DNSProviderRoute53, Route53: r53.Route53, Credentials: &fleet.DNSCredentials{AccessKeyID: leaky}},
		"http endpoint":  {Name: "apps.example.com", Provider: fleet.DNSProviderRoute53, Route53: &fleet.Route53Settings{HostedZoneID: "Z1", Endpoint: "http://route53.example.com"}},
		"zone id":        {Name: "apps.example.com", Provider: fleet.DNSProviderRoute53, Route53: &fleet.Route53Settings{HostedZoneID: "/hostedzone/z1"}},
		"bad nameserver": {Name: "apps.example.com", Provider: fleet.DNSProviderRoute53, Route53: r53.Route53, Nameservers: []string{"ns1.example.com"}},
	} {
		err := c.Validate()
		if fleet.ErrorCodeOf(err) != fleet.CodeValidation {
			t.Errorf("%s: Validate = %v, want CodeValidation", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), leaky) || strings.Contains(err.Error(), secret)) {
			t.Errorf("%s: the error holds a secret: %v", name, err)
		}
	}
	ns := []string{"198.51.100.1:53"}
	z, err := fleet.DNSZoneUpdate{Nameservers: &ns}.Apply(fleet.DNSZone{Provider: fleet.DNSProviderRoute53})
	if err != nil || len(z.Nameservers) != 1 {
		t.Errorf("update nameservers = %+v, %v", z, err)
	}
	if _, err := (fleet.DNSZoneUpdate{RFC2136: good.RFC2136}).Apply(fleet.DNSZone{Provider: fleet.DNSProviderRoute53}); fleet.ErrorCodeOf(err) != fleet.CodeValidation {
		t.Errorf("rfc2136 settings on a route53 zone: %v", err)
	}
}
