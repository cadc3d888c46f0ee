package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// Secrets the DNS tests onboard zones with; no answer may carry them.
const (
	testTSIGSecret      = "dGVzdC10c2lnLXNlY3JldC1rZXktMDEyMzQ1Njc4OQ==" // base64 of 32 bytes
	testTSIGSecretNext  = "bmV4dC10c2lnLXNlY3JldC1rZXktMDEyMzQ1Njc4OQ=="
	testAccessKeyID     = "AKIATESTACCESSKEYID0"
	testSecretAccessKey = "test-secret-access-key-never-returned"
)

// dnsSecrets lists the secrets no DNS answer may carry.
func dnsSecrets() []string {
	return []string{testTSIGSecret, testTSIGSecretNext, testAccessKeyID, testSecretAccessKey}
}

// noSecrets fails g when body carries one of the zones' secrets.
func noSecrets(g gomega.Gomega, call string, body []byte) {
	for _, secret := range dnsSecrets() {
		g.Expect(string(body)).NotTo(gomega.ContainSubstring(secret), "%s returned a zone's credentials", call)
	}
}

// rfc2136Zone is an RFC 2136 zone to onboard, with its TSIG secret.
func rfc2136Zone(name string) admin.DNSZoneCreate {
	return admin.DNSZoneCreate{Name: name, Provider: admin.DNSProviderRFC2136,
		Rfc2136:     &admin.RFC2136Settings{Server: "ns1.example.com:53", TsigKeyName: "fleet-manager", TsigAlgorithm: admin.TSIGHMACSHA256},
		Credentials: &admin.DNSCredentials{TsigSecret: ptr(testTSIGSecret)}}
}

// createDNSZone onboards a zone as an administrator and fails t unless it is created.
func (e *stackEnv) createDNSZone(t testing.TB, body admin.DNSZoneCreate) admin.DNSZone {
	t.Helper()
	resp, err := e.admin.CreateDNSZoneWithResponse(context.Background(), body, adminAuth(e.adminToken(t)))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateDNSZone(%s) = %s; want 201", body.Name, outcome(resp, err))
	}
	return *resp.JSON201
}

// createDNSService onboards a naming policy as an administrator and fails t
// unless it is created.
func (e *stackEnv) createDNSService(t testing.TB, body admin.DNSServiceCreate) admin.DNSService {
	t.Helper()
	resp, err := e.admin.CreateDNSServiceWithResponse(context.Background(), body, adminAuth(e.adminToken(t)))
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("CreateDNSService(%s) = %s; want 201", body.Name, outcome(resp, err))
	}
	return *resp.JSON201
}

// TestDNSAdminAPI onboards zones and naming policies through the admin API:
// only fleet administrators change them (viewers read), credentials never
// come back, names and subtrees do not overlap, If-Match guards changes, and
// a zone or a policy in use is not deleted.
func TestDNSAdminAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			testDNSAdminAPI(t, newStackEnv(t, f))
		})
	}
}

func testDNSAdminAPI(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	adm := adminAuth(e.adminToken(t))

	// A user, even an org admin, and a fleet viewer do not onboard.
	for who, tok := range map[string]string{"user": e.userToken(t, "org-a", "alice"), "viewer": e.viewerToken(t)} {
		created, err := e.admin.CreateDNSZoneWithResponse(ctx, rfc2136Zone("services.example.com"), adminAuth(tok))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSZone("+who+")", e.apiEnv, fromAdmin(created.JSON403), created.StatusCode(), http.StatusForbidden,
			fleet.CodeAdminRoleRequired)
		svc, err := e.admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: "kafka", ZoneId: "z"}, adminAuth(tok))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSService("+who+")", e.apiEnv, fromAdmin(svc.JSON403), svc.StatusCode(), http.StatusForbidden,
			fleet.CodeAdminRoleRequired)
	}
	userList, err := e.admin.ListDNSZonesWithResponse(ctx, nil, adminAuth(e.userToken(t, "org-a", "alice")))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "ListDNSZones(user)", e.apiEnv, fromAdmin(userList.JSON403), userList.StatusCode(), http.StatusForbidden,
		fleet.CodeAdminRoleRequired)

	// An RFC 2136 zone and a Route53 zone; their secrets are sealed.
	createResp, err := e.admin.CreateDNSZoneWithResponse(ctx, rfc2136Zone("Services.Example.COM."), adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(createResp.JSON201).NotTo(gomega.BeNil(), outcome(createResp, err))
	zone := *createResp.JSON201
	noSecrets(g, "CreateDNSZone(rfc2136)", createResp.Body)
	g.Expect(zone.Name).To(gomega.Equal("services.example.com"))
	g.Expect(zone.HasCredentials).To(gomega.BeTrue())
	g.Expect(zone.Href).To(gomega.Equal(e.http.BasePath + "/admin/dns_zones/" + zone.Id))
	g.Expect(createResp.HTTPResponse.Header.Get("Location")).To(gomega.Equal(zone.Href))
	g.Expect(createResp.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(fleet.ETag(zone.Generation)))
	r53 := e.createDNSZone(t, admin.DNSZoneCreate{Name: "apps.example.org", Provider: admin.DNSProviderRoute53,
		Route53:     &admin.Route53Settings{HostedZoneId: "Z0123456789ABCDEFGHIJ", Region: ptr("us-east-1")},
		Credentials: &admin.DNSCredentials{AccessKeyId: ptr(testAccessKeyID), SecretAccessKey: ptr(testSecretAccessKey)}})
	g.Expect(r53.HasCredentials).To(gomega.BeTrue())
	g.Expect(r53.Route53).NotTo(gomega.BeNil())
	g.Expect(r53.Route53.HostedZoneId).To(gomega.Equal("Z0123456789ABCDEFGHIJ"))

	// The same zone, or one inside it, is refused without repeating the name;
	// an RFC 2136 zone needs its secret.
	for _, name := range []string{"services.example.com", "inner.services.example.com"} {
		dup, err := e.admin.CreateDNSZoneWithResponse(ctx, rfc2136Zone(name), adm)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSZone("+name+")", e.apiEnv, fromAdmin(dup.JSON409), dup.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)
		g.Expect(dup.JSON409.Reason).NotTo(gomega.ContainSubstring("example"))
	}
	noCreds := rfc2136Zone("other.example.net")
	noCreds.Credentials = nil
	bad, err := e.admin.CreateDNSZoneWithResponse(ctx, noCreds, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSZone(no secret)", e.apiEnv, fromAdmin(bad.JSON400), bad.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)

	// A viewer reads; the list searches.
	viewer := adminAuth(e.viewerToken(t))
	list, err := e.admin.ListDNSZonesWithResponse(ctx, &admin.ListDNSZonesParams{Search: ptr("provider = 'rfc2136'")}, viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), outcome(list, err))
	g.Expect(list.JSON200.Total).To(gomega.Equal(1))
	g.Expect(list.JSON200.Items[0].Id).To(gomega.Equal(zone.Id))
	noSecrets(g, "ListDNSZones()", list.Body)

	// Changes are guarded by If-Match; new credentials are sealed anew.
	stale, err := e.admin.UpdateDNSZoneWithResponse(ctx, zone.Id, &admin.UpdateDNSZoneParams{IfMatch: ptr(fleet.ETag(zone.Generation + 5))},
		admin.DNSZonePatch{Nameservers: &[]string{"ns2.example.com:53"}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSZone(stale)", e.apiEnv, fromAdmin(stale.JSON412), stale.StatusCode(), http.StatusPreconditionFailed,
		fleet.CodePreconditionFailed)
	patched, err := e.admin.UpdateDNSZoneWithResponse(ctx, zone.Id, &admin.UpdateDNSZoneParams{IfMatch: ptr(fleet.ETag(zone.Generation))},
		admin.DNSZonePatch{Nameservers: &[]string{"ns2.example.com:53"}, Credentials: &admin.DNSCredentials{TsigSecret: ptr(testTSIGSecretNext)}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(patched.JSON200).NotTo(gomega.BeNil(), outcome(patched, err))
	noSecrets(g, "UpdateDNSZone()", patched.Body)
	g.Expect(patched.JSON200.Nameservers).To(gomega.Equal([]string{"ns2.example.com:53"}))
	g.Expect(patched.JSON200.Generation).To(gomega.Equal(zone.Generation + 1))
	g.Expect(patched.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(fleet.ETag(zone.Generation + 1)))
	wrongKind, err := e.admin.UpdateDNSZoneWithResponse(ctx, zone.Id, nil,
		admin.DNSZonePatch{Route53: &admin.Route53Settings{HostedZoneId: "Z1"}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSZone(route53 on rfc2136)", e.apiEnv, fromAdmin(wrongKind.JSON400), wrongKind.StatusCode(), http.StatusBadRequest,
		fleet.CodeValidation)

	// A naming policy in the zone, with its defaults and its subtree.
	svcResp, err := e.admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: "kafka", ZoneId: zone.Id,
		WriterOrganizations: &[]string{"org-a"}, MinTtl: ptr(60), MaxTtl: ptr(3600)}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(svcResp.JSON201).NotTo(gomega.BeNil(), outcome(svcResp, err))
	svc := *svcResp.JSON201
	g.Expect(svc.Subtree).To(gomega.Equal("kafka.services.example.com"))
	g.Expect(svc.NameTemplate).To(gomega.Equal(fleet.DNSInstancePlaceholder))
	g.Expect(svc.RecordTypes).To(gomega.Equal([]admin.DNSRecordType{admin.DNSRecordCNAME, admin.DNSRecordA, admin.DNSRecordAAAA}))
	g.Expect([]int{svc.MinTtl, svc.DefaultTtl, svc.MaxTtl}).To(gomega.Equal([]int{60, 300, 3600}))
	g.Expect(svc.WriterServiceAccounts).To(gomega.BeEmpty())
	g.Expect(svc.Href).To(gomega.Equal(e.http.BasePath + "/admin/dns_services/" + svc.Id))
	g.Expect(svcResp.HTTPResponse.Header.Get("Location")).To(gomega.Equal(svc.Href))

	// Another policy may not take the name, nor a subtree that overlaps.
	for _, c := range []admin.DNSServiceCreate{
		{Name: "kafka", ZoneId: r53.Id},
		{Name: "streams", ZoneId: zone.Id, Subdomain: ptr("eu.kafka")},
	} {
		dup, err := e.admin.CreateDNSServiceWithResponse(ctx, c, adm)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSService("+c.Name+")", e.apiEnv, fromAdmin(dup.JSON409), dup.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)
		g.Expect(dup.JSON409.Reason).NotTo(gomega.ContainSubstring("kafka"))
	}
	noZone, err := e.admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: "web", ZoneId: "no-such-zone"}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSService(unknown zone)", e.apiEnv, fromAdmin(noZone.JSON404), noZone.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	badTemplate, err := e.admin.CreateDNSServiceWithResponse(ctx, admin.DNSServiceCreate{Name: "web", ZoneId: zone.Id,
		NameTemplate: ptr("{instance}.{instance}")}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSService(two placeholders)", e.apiEnv, fromAdmin(badTemplate.JSON400), badTemplate.StatusCode(),
		http.StatusBadRequest, fleet.CodeValidation)

	// The policy's writers and rules change under If-Match; the zone counts it.
	staleSvc, err := e.admin.UpdateDNSServiceWithResponse(ctx, svc.Id, &admin.UpdateDNSServiceParams{IfMatch: ptr(`"99"`)},
		admin.DNSServicePatch{RecordTypes: &[]admin.DNSRecordType{admin.DNSRecordCNAME}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSService(stale)", e.apiEnv, fromAdmin(staleSvc.JSON412), staleSvc.StatusCode(), http.StatusPreconditionFailed,
		fleet.CodePreconditionFailed)
	svcPatched, err := e.admin.UpdateDNSServiceWithResponse(ctx, svc.Id, &admin.UpdateDNSServiceParams{IfMatch: ptr(fleet.ETag(svc.Generation))},
		admin.DNSServicePatch{RecordTypes: &[]admin.DNSRecordType{admin.DNSRecordCNAME}, WriterServiceAccounts: &[]string{"service-account-ci"}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(svcPatched.JSON200).NotTo(gomega.BeNil(), outcome(svcPatched, err))
	g.Expect(svcPatched.JSON200.RecordTypes).To(gomega.Equal([]admin.DNSRecordType{admin.DNSRecordCNAME}))
	g.Expect(svcPatched.JSON200.WriterServiceAccounts).To(gomega.Equal([]string{"service-account-ci"}))
	badTTL, err := e.admin.UpdateDNSServiceWithResponse(ctx, svc.Id, nil, admin.DNSServicePatch{DefaultTtl: ptr(30)}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSService(default below min)", e.apiEnv, fromAdmin(badTTL.JSON400), badTTL.StatusCode(), http.StatusBadRequest,
		fleet.CodeValidation)
	got, err := e.admin.GetDNSZoneWithResponse(ctx, zone.Id, viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.JSON200).NotTo(gomega.BeNil(), outcome(got, err))
	g.Expect(got.JSON200.ServiceCount).To(gomega.Equal(1))
	noSecrets(g, "GetDNSZone()", got.Body)
	services, err := e.admin.ListDNSServicesWithResponse(ctx, &admin.ListDNSServicesParams{Search: ptr("zone_name = 'services.example.com'")}, viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(services.JSON200).NotTo(gomega.BeNil(), outcome(services, err))
	g.Expect(services.JSON200.Total).To(gomega.Equal(1))

	// A zone that holds a policy stays; without it, it goes.
	held, err := e.admin.DeleteDNSZoneWithResponse(ctx, zone.Id, nil, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSZone(held)", e.apiEnv, fromAdmin(held.JSON409), held.StatusCode(), http.StatusConflict, fleet.CodeConflict)
	viewerDel, err := e.admin.DeleteDNSServiceWithResponse(ctx, svc.Id, nil, viewer)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSService(viewer)", e.apiEnv, fromAdmin(viewerDel.JSON403), viewerDel.StatusCode(), http.StatusForbidden,
		fleet.CodeAdminRoleRequired)
	delSvc, err := e.admin.DeleteDNSServiceWithResponse(ctx, svc.Id, &admin.DeleteDNSServiceParams{IfMatch: ptr(fleet.ETag(svcPatched.JSON200.Generation))}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(delSvc.StatusCode()).To(gomega.Equal(http.StatusNoContent), outcome(delSvc, err))
	gone, err := e.admin.GetDNSServiceWithResponse(ctx, svc.Id, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "GetDNSService(deleted)", e.apiEnv, fromAdmin(gone.JSON404), gone.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	staleDel, err := e.admin.DeleteDNSZoneWithResponse(ctx, zone.Id, &admin.DeleteDNSZoneParams{IfMatch: ptr(fleet.ETag(zone.Generation))}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSZone(stale)", e.apiEnv, fromAdmin(staleDel.JSON412), staleDel.StatusCode(), http.StatusPreconditionFailed,
		fleet.CodePreconditionFailed)
	delZone, err := e.admin.DeleteDNSZoneWithResponse(ctx, zone.Id, &admin.DeleteDNSZoneParams{IfMatch: ptr(fleet.ETag(zone.Generation + 1))}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(delZone.StatusCode()).To(gomega.Equal(http.StatusNoContent), outcome(delZone, err))
	all, err := e.admin.ListDNSZonesWithResponse(ctx, nil, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(all.JSON200).NotTo(gomega.BeNil(), outcome(all, err))
	g.Expect(all.JSON200.Items).To(gomega.HaveLen(1))
	g.Expect(all.JSON200.Items[0].Id).To(gomega.Equal(r53.Id))
	noSecrets(g, "ListDNSZones()", all.Body)
	g.Expect(string(all.Body)).NotTo(gomega.ContainSubstring(`"credentials"`), "a zone answer has no credentials field")
}
