package postgres_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/keyrotation"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// dnsAdmin is the fleet administrator who onboards zones and services.
var dnsAdmin = fleet.Identity{Username: "ada"}

// tsigSecret is a valid TSIG secret holding text.
func tsigSecret(text string) string { return base64.StdEncoding.EncodeToString([]byte(text)) }

// rfc2136Zone is a zone to onboard on an RFC 2136 server.
func rfc2136Zone(name string) fleet.DNSZoneCreate {
	return fleet.DNSZoneCreate{Name: name, Provider: fleet.DNSProviderRFC2136,
		RFC2136:     &fleet.RFC2136Settings{Server: "ns1." + name + ":53", TSIGKeyName: "fleet-key", TSIGAlgorithm: fleet.TSIGHMACSHA256},
		Credentials: &fleet.DNSCredentials{TSIGSecret: tsigSecret("a secret of sixteen bytes or more")}}
}

// codeOf is err's code, for messages.
func codeOf(err error) fleet.ErrorCode { return fleet.ErrorCodeOf(err) }

// mustDNSService onboards a zone and a service in it.
func mustDNSService(t *testing.T, store *postgres.Store, zone, service string, writers ...string) (fleet.DNSZone, fleet.DNSService) {
	t.Helper()
	if len(writers) == 0 {
		writers = defaultDNSWriters
	}
	ctx := context.Background()
	z, err := store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone(zone))
	if err != nil {
		t.Fatalf("CreateDNSZone(%s) = %v", zone, err)
	}
	s, err := store.CreateDNSService(ctx, dnsAdmin, fleet.DNSServiceCreate{Name: service, ZoneID: z.ID, WriterOrgs: writers})
	if err != nil {
		t.Fatalf("CreateDNSService(%s) = %v", service, err)
	}
	return z, s
}

func TestDNSZonesOnboardUpdateAndDelete(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)

	zone, err := store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("Example.COM."))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(zone.Name).To(gomega.Equal("example.com"))
	g.Expect(zone.HasCredentials).To(gomega.BeTrue())
	g.Expect(zone.Generation).To(gomega.Equal(int64(1)))
	g.Expect(zone.RFC2136).To(gomega.Equal(&fleet.RFC2136Settings{Server: "ns1.Example.COM.:53", TSIGKeyName: "fleet-key", TSIGAlgorithm: fleet.TSIGHMACSHA256}))
	g.Expect(zone.Nameservers).To(gomega.BeEmpty())

	route53, err := store.CreateDNSZone(ctx, dnsAdmin, fleet.DNSZoneCreate{Name: "example.org", Provider: fleet.DNSProviderRoute53,
		Route53: &fleet.Route53Settings{HostedZoneID: "Z0123456789ABC"}, Nameservers: []string{"ns-1.awsdns.net:53"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(route53.HasCredentials).To(gomega.BeFalse(), "a Route53 zone on the deployment's own credentials")

	// A name that is a live zone's, or inside one, or that holds one.
	for _, name := range []string{"example.com", "shop.example.com", "a.b.example.org", "org.example.com"} {
		_, err := store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone(name))
		if name == "org.example.com" {
			g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNameTaken), "inside example.com")
			continue
		}
		g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNameTaken), "CreateDNSZone(%s)", name)
		g.Expect(fleet.ErrorMessageOf(err)).NotTo(gomega.ContainSubstring(name), "the refusal echoes no value")
	}
	_, err = store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("apps.example.net"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("example.net"))
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNameTaken), "example.net holds apps.example.net")
	_, err = store.CreateDNSZone(ctx, dnsAdmin, fleet.DNSZoneCreate{Name: "bad", Provider: fleet.DNSProviderRFC2136})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeValidation))

	zones, total, err := store.ListDNSZones(ctx, fleet.ListQuery{Search: "provider = 'rfc2136'", OrderBy: "name desc"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(2))
	g.Expect([]string{zones[0].Name, zones[1].Name}).To(gomega.Equal([]string{"example.com", "apps.example.net"}))

	// If-Match, then a change of nameservers and credentials, sealed anew.
	stale := int64(7)
	_, err = store.UpdateDNSZone(ctx, zone.ID, &stale, fleet.DNSZoneUpdate{})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodePreconditionFailed))
	before := sealedColumn(t, db, "dns_zones", zone.ID)
	ns := []string{"10.0.0.53:53"}
	one := int64(1)
	updated, err := store.UpdateDNSZone(ctx, zone.ID, &one, fleet.DNSZoneUpdate{Nameservers: &ns,
		Credentials: &fleet.DNSCredentials{TSIGSecret: tsigSecret("another secret, sixteen bytes+")}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(updated.Generation).To(gomega.Equal(int64(2)))
	g.Expect(updated.Nameservers).To(gomega.Equal(ns))
	g.Expect(sealedColumn(t, db, "dns_zones", zone.ID).Data).NotTo(gomega.Equal(before.Data))
	_, err = store.UpdateDNSZone(ctx, zone.ID, nil, fleet.DNSZoneUpdate{Route53: &fleet.Route53Settings{HostedZoneID: "Z1"}})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeValidation))

	// Deleted only without services.
	svc, err := store.CreateDNSService(ctx, dnsAdmin, fleet.DNSServiceCreate{Name: "shop", ZoneID: zone.ID})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	found, err := store.FindDNSZone(ctx, zone.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(found.Services).To(gomega.Equal(1))
	g.Expect(codeOf(store.DeleteDNSZone(ctx, zone.ID, nil))).To(gomega.Equal(fleet.CodeConflict))
	g.Expect(store.DeleteDNSService(ctx, svc.ID, &svc.Generation)).To(gomega.Succeed())
	g.Expect(codeOf(store.DeleteDNSZone(ctx, zone.ID, &one))).To(gomega.Equal(fleet.CodePreconditionFailed))
	g.Expect(store.DeleteDNSZone(ctx, zone.ID, &updated.Generation)).To(gomega.Succeed())
	_, err = store.FindDNSZone(ctx, zone.ID)
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	// Its name is free again.
	_, err = store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("example.com"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
}

// Recognizable DNS credentials that must never be stored or returned in
// clear.
const (
	tsigMarker      = "TSIG-SECRET-MARKER-0123456789abcdefghijk"
	accessKeyMarker = "ACCESSKEYMARKER0123456789ABCDEFGHIJKLMNO"
	secretKeyMarker = "SECRET-KEY-MARKER-0123456789abcdefghijkl"
)

func TestDNSZoneCredentialsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	rfc := rfc2136Zone("example.com")
	rfc.Credentials = &fleet.DNSCredentials{TSIGSecret: tsigSecret(tsigMarker)}
	zone, err := store.CreateDNSZone(ctx, dnsAdmin, rfc)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	r53Creds := fleet.DNSCredentials{AccessKeyID: accessKeyMarker, SecretAccessKey: secretKeyMarker}
	r53, err := store.CreateDNSZone(ctx, dnsAdmin, fleet.DNSZoneCreate{Name: "example.org", Provider: fleet.DNSProviderRoute53,
		Route53: &fleet.Route53Settings{HostedZoneID: "Z0123456789ABC"}, Credentials: &r53Creds})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, svc := mustDNSServiceIn(t, store, zone, "shop")
	_, _, err = store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, svc.Name, fleet.DNSRecordCreate{Instance: "i1", Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	dump := dumpDatabase(t, db)
	g.Expect(dump).To(gomega.ContainSubstring("example.org"), "the dump covers dns_zones")
	g.Expect(leakedMarkers(dump, tsigMarker, accessKeyMarker, secretKeyMarker)).To(gomega.BeEmpty())
	g.Expect(dump).NotTo(gomega.ContainSubstring(tsigSecret(tsigMarker)))

	var returned []string
	for _, id := range []string{zone.ID, r53.ID} {
		z, err := store.FindDNSZone(ctx, id)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(z.HasCredentials).To(gomega.BeTrue())
		returned = append(returned, fmt.Sprintf("%+v", z))
	}
	zones, _, err := store.ListDNSZones(ctx, fleet.ListQuery{})
	returned = append(returned, fmt.Sprintf("%+v %v", zones, err))
	g.Expect(leakedMarkers(strings.Join(returned, "\n"), tsigMarker, accessKeyMarker, secretKeyMarker)).To(gomega.BeEmpty())

	// dns_mgr's claim opens them, bound to their row.
	claims, err := store.ClaimDNSZones(ctx, "mgr", []string{r53.ID}, 10, 10, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	opened := map[string]fleet.DNSCredentials{}
	for _, c := range claims {
		opened[c.Zone.Zone.ID] = c.Zone.Credentials
	}
	g.Expect(opened).To(gomega.Equal(map[string]fleet.DNSCredentials{zone.ID: {TSIGSecret: tsigSecret(tsigMarker)}, r53.ID: r53Creds}))
	g.Expect(db.Gorm.Exec(`UPDATE dns_zones t SET credentials = v.credentials, credentials_key_id = v.credentials_key_id
FROM dns_zones v WHERE v.id = ? AND t.id = ?`, zone.ID, r53.ID).Error).To(gomega.Succeed())
	g.Expect(db.Gorm.Exec(`UPDATE dns_zones SET claimed_by = NULL, claimed_until = NULL`).Error).To(gomega.Succeed())
	_, err = store.ClaimDNSZones(ctx, "mgr", []string{r53.ID}, 10, 10, time.Minute)
	g.Expect(err).To(gomega.HaveOccurred(), "a sealed value copied to another zone's row does not open")
}

// defaultDNSWriters are the writers of a test's service that names none:
// the organisations the tests write records as (the store refuses any
// other, CodeDNSWriterNotAllowed).
var defaultDNSWriters = []string{"org-a", "org-b"}

// mustDNSServiceIn onboards a service in zone, written by defaultDNSWriters.
func mustDNSServiceIn(t *testing.T, store *postgres.Store, zone fleet.DNSZone, name string) (fleet.DNSZone, fleet.DNSService) {
	t.Helper()
	s, err := store.CreateDNSService(context.Background(), dnsAdmin, fleet.DNSServiceCreate{Name: name, ZoneID: zone.ID, WriterOrgs: defaultDNSWriters})
	if err != nil {
		t.Fatalf("CreateDNSService(%s) = %v", name, err)
	}
	return zone, s
}

func TestDNSServicesOwnNonOverlappingSubtrees(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	zone, shop := mustDNSService(t, store, "example.com", "shop", "org-a")
	g.Expect(shop.Subdomain).To(gomega.Equal("shop"))
	g.Expect(shop.ZoneName).To(gomega.Equal("example.com"))
	g.Expect(shop.NameTemplate).To(gomega.Equal(fleet.DNSInstancePlaceholder))
	g.Expect(shop.RecordTypes).To(gomega.Equal(fleet.DNSRecordTypes()))
	g.Expect(shop.WriterOrgs).To(gomega.Equal([]string{"org-a"}))
	other, err := store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("example.org"))
	g.Expect(err).NotTo(gomega.HaveOccurred())

	for _, tc := range []struct {
		create fleet.DNSServiceCreate
		code   fleet.ErrorCode
	}{
		{fleet.DNSServiceCreate{Name: "shop", ZoneID: other.ID}, fleet.CodeNameTaken},
		{fleet.DNSServiceCreate{Name: "cart", ZoneID: zone.ID, Subdomain: "eu.shop"}, fleet.CodeNameTaken},
		{fleet.DNSServiceCreate{Name: "cart", ZoneID: zone.ID, Subdomain: "SHOP."}, fleet.CodeNameTaken},
		{fleet.DNSServiceCreate{Name: "cart", ZoneID: "no-such-zone"}, fleet.CodeNotFound},
		{fleet.DNSServiceCreate{Name: "Cart", ZoneID: zone.ID}, fleet.CodeValidation},
		{fleet.DNSServiceCreate{Name: "cart", ZoneID: zone.ID, NameTemplate: "x"}, fleet.CodeValidation},
		{fleet.DNSServiceCreate{Name: "cart", ZoneID: zone.ID, Subdomain: strings.Repeat("a.", 122) + "b"}, fleet.CodeValidation},
	} {
		_, err := store.CreateDNSService(ctx, dnsAdmin, tc.create)
		g.Expect(codeOf(err)).To(gomega.Equal(tc.code), "CreateDNSService(%+v) = %v", tc.create, err)
	}
	// The same subdomain in another zone is another subtree.
	cart, err := store.CreateDNSService(ctx, dnsAdmin, fleet.DNSServiceCreate{Name: "cart", ZoneID: other.ID, Subdomain: "shop",
		NameTemplate: "{instance}.db", RecordTypes: []fleet.DNSRecordType{fleet.DNSRecordA}, MinTTL: 30, MaxTTL: 600, WriterOrgs: defaultDNSWriters})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(cart.DefaultTTL).To(gomega.Equal(300))
	byName, err := store.FindDNSServiceByName(ctx, "cart")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(byName.ID).To(gomega.Equal(cart.ID))
	_, err = store.FindDNSServiceByName(ctx, "nothing")
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))

	services, total, err := store.ListDNSServices(ctx, fleet.ListQuery{Search: "zone_name = 'example.org'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))
	g.Expect(services[0].Name).To(gomega.Equal("cart"))

	// Updates: If-Match, rules checked, records keep theirs.
	_, _, err = store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, cart.Name, fleet.DNSRecordCreate{Instance: "i1", Type: fleet.DNSRecordA, TTL: 60, Targets: []string{"192.0.2.1"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stale := int64(5)
	_, err = store.UpdateDNSService(ctx, cart.ID, &stale, fleet.DNSServiceUpdate{})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodePreconditionFailed))
	minTTL := 100
	_, err = store.UpdateDNSService(ctx, cart.ID, nil, fleet.DNSServiceUpdate{MinTTL: &minTTL, DefaultTTL: new(int)})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeValidation))
	writers := []string{"org-b"}
	updated, err := store.UpdateDNSService(ctx, cart.ID, &cart.Generation, fleet.DNSServiceUpdate{MinTTL: &minTTL, WriterOrgs: &writers})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(updated.Generation).To(gomega.Equal(int64(2)))
	g.Expect(updated.MinTTL).To(gomega.Equal(100))
	g.Expect(updated.WriterOrgs).To(gomega.Equal(writers))
	g.Expect(updated.Records).To(gomega.Equal(1))
	recs, _, err := store.ListDNSRecords(ctx, "org-a", updated, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(recs[0].TTL).To(gomega.Equal(60), "an existing record keeps its TTL")

	g.Expect(codeOf(store.DeleteDNSService(ctx, cart.ID, nil))).To(gomega.Equal(fleet.CodeConflict), "it holds a record")
	g.Expect(store.DeleteDNSService(ctx, shop.ID, nil)).To(gomega.Succeed())
	_, err = store.FindDNSService(ctx, shop.ID)
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	// Its subtree is free again.
	_, err = store.CreateDNSService(ctx, dnsAdmin, fleet.DNSServiceCreate{Name: "eu-shop", ZoneID: zone.ID, Subdomain: "eu.shop"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
}

// TestDNSServicesConcurrentCreatesOverlapOnce creates services whose
// subtrees all overlap at once: one wins, the others are refused.
func TestDNSServicesConcurrentCreatesOverlapOnce(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	zone, err := store.CreateDNSZone(ctx, dnsAdmin, rfc2136Zone("example.com"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Each subtree holds the next: every two overlap.
			sub := strings.Repeat("x.", i) + "apps"
			_, errs[i] = store.CreateDNSService(ctx, dnsAdmin, fleet.DNSServiceCreate{Name: fmt.Sprintf("svc-%d", i), ZoneID: zone.ID, Subdomain: sub})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch codeOf(err) {
		case fleet.CodeNameTaken:
		default:
			g.Expect(err).NotTo(gomega.HaveOccurred(), "racer %d", i)
			won++
		}
	}
	g.Expect(won).To(gomega.Equal(1))
	_, total, err := store.ListDNSServices(ctx, fleet.ListQuery{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))
}

// TestDNSZoneCredentialsRotateWithTheMasterKey re-encrypts a zone's
// credentials under a new master key: dns_mgr's claim opens them with the
// new key alone.
func TestDNSZoneCredentialsRotateWithTheMasterKey(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	db, _ := pgtest.NewMigratedDatabase(t)
	a, b := masterKey(t), masterKey(t)
	underA := postgres.NewStore(db, mustKeyring(t, a), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	create := rfc2136Zone("example.com")
	create.Credentials = &fleet.DNSCredentials{TSIGSecret: tsigSecret(tsigMarker)}
	zone, err := underA.CreateDNSZone(ctx, dnsAdmin, create)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	n, err := keyrotation.New(db, mustKeyring(t, b, a)).ReencryptSecrets(ctx, 10)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(1))
	onlyB := postgres.NewStore(db, mustKeyring(t, b), fleet.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	g.Expect(onlyB.UnknownMasterKeys(ctx)).To(gomega.BeEmpty())
	g.Expect(underA.UnknownMasterKeys(ctx)).To(gomega.HaveLen(1), "the zone's credentials are no longer under the old key")
	claims, err := onlyB.ClaimDNSZones(ctx, "mgr", []string{zone.ID}, 1, 1, time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(claims).To(gomega.HaveLen(1))
	g.Expect(claims[0].Zone.Credentials).To(gomega.Equal(*create.Credentials))
}

func TestDNSResyncIsValidated(t *testing.T) {
	t.Parallel()
	cfg := postgres.DefaultStoreConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultStoreConfig().Validate() = %v", err)
	}
	cfg.DNSResync = time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--dns-cluster-resync") {
		t.Errorf("Validate() with a one-second DNS resync = %v; want an error naming --dns-cluster-resync", err)
	}
}
