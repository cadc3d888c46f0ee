package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/auth"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestDNSRecordsAPI drives service instances' records through the public
// API: only a service's writers change them, each organisation sees its
// own, a name is made by the policy and held by one record, creation is
// idempotent, If-Match guards changes, and a deletion goes through dns_mgr
// (the record shows phase deleting until the provider removed the name).
func TestDNSRecordsAPI(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			testDNSRecordsAPI(t, newStackEnv(t, f))
		})
	}
}

func testDNSRecordsAPI(t *testing.T, e *stackEnv) {
	g := gomega.NewWithT(t)
	ctx := context.Background()
	zone := e.createDNSZone(t, rfc2136Zone("services.example.com"))
	kafka := e.createDNSService(t, admin.DNSServiceCreate{Name: "kafka", ZoneId: zone.Id, WriterOrganizations: &[]string{"org-a", "org-b"},
		WriterServiceAccounts: &[]string{"service-account-ci"}, RecordTypes: &[]admin.DNSRecordType{admin.DNSRecordCNAME, admin.DNSRecordA},
		MinTtl: ptr(60), MaxTtl: ptr(3600)})
	e.createDNSService(t, admin.DNSServiceCreate{Name: "web", ZoneId: zone.Id, Subdomain: ptr("www"), NameTemplate: ptr("{instance}-web"),
		WriterOrganizations: &[]string{"org-secret-tenant"}})
	alice := bearer(e.userToken(t, "org-a", "alice"))
	bob := bearer(e.token(t, auth.TokenRequest{OrgID: "org-a", Username: "bob", Roles: e.authz.OrgRoles.OrgMember}))
	carol := bearer(e.userToken(t, "org-b", "carol"))
	dave := bearer(e.userToken(t, "org-c", "dave"))
	ci := bearer(e.userToken(t, "org-d", "service-account-ci"))

	// Each caller sees the services it writes, and nothing of other writers.
	writable := func(tok public.RequestEditorFn) []string {
		resp, err := e.client.ListWritableDNSServicesWithResponse(ctx, nil, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.JSON200).NotTo(gomega.BeNil(), outcome(resp, err))
		g.Expect(string(resp.Body)).NotTo(gomega.ContainSubstring("org-secret-tenant"))
		var names []string
		for _, s := range resp.JSON200.Items {
			names = append(names, s.Name)
		}
		return names
	}
	g.Expect(writable(alice)).To(gomega.Equal([]string{"kafka"}))
	g.Expect(writable(ci)).To(gomega.Equal([]string{"kafka"}))
	g.Expect(writable(dave)).To(gomega.BeEmpty())
	g.Expect(writable(bearer(e.adminToken(t)))).To(gomega.Equal([]string{"kafka", "web"}))
	one, err := e.client.ListWritableDNSServicesWithResponse(ctx, &public.ListWritableDNSServicesParams{Page: ptr(1), Size: ptr(1)}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(one.JSON200).NotTo(gomega.BeNil(), outcome(one, err))
	svc := one.JSON200.Items[0]
	g.Expect(svc.Subtree).To(gomega.Equal("kafka.services.example.com"))
	g.Expect(svc.RecordsHref).To(gomega.Equal(e.http.BasePath + "/dns_services/kafka/records"))
	g.Expect([]int{svc.MinTtl, svc.DefaultTtl, svc.MaxTtl}).To(gomega.Equal([]int{60, 300, 3600}))

	// A record named by the policy, pending until dns_mgr publishes it.
	target := public.DNSRecordCreate{Instance: "orders", Targets: &[]string{"ingress.apps.cluster-1.example.net"}}
	created, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", target, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created.JSON201).NotTo(gomega.BeNil(), outcome(created, err))
	rec := *created.JSON201
	g.Expect(rec.Name).To(gomega.Equal("orders.kafka.services.example.com"))
	g.Expect(rec.Type).To(gomega.Equal(public.DNSRecordCNAME))
	g.Expect(rec.Ttl).To(gomega.Equal(300))
	g.Expect(rec.Phase).To(gomega.Equal(public.DNSRecordPending))
	g.Expect(rec.Values).To(gomega.BeEmpty())
	g.Expect(rec.Service).To(gomega.Equal("kafka"))
	g.Expect(rec.Href).To(gomega.Equal(e.http.BasePath + "/dns_services/kafka/records/" + rec.Id))
	g.Expect(created.HTTPResponse.Header.Get("Location")).To(gomega.Equal(rec.Href))
	g.Expect(created.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(fleet.ETag(rec.Generation)))
	accepted := false
	for _, c := range rec.Conditions {
		accepted = accepted || (c.Type == fleet.DNSConditionAccepted && c.Status == public.ConditionStatusTrue)
	}
	g.Expect(accepted).To(gomega.BeTrue(), "conditions %+v", rec.Conditions)

	// Asked again, the same record: 200, not a second one.
	again, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", target, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(again.JSON200).NotTo(gomega.BeNil(), outcome(again, err))
	g.Expect(again.JSON200.Id).To(gomega.Equal(rec.Id))

	// The name is the policy's, never free text: an instance that is not one
	// DNS label, a TTL or a type outside the policy are refused.
	for what, body := range map[string]public.DNSRecordCreate{
		"dot":       {Instance: "a.b", Targets: target.Targets},
		"uppercase": {Instance: "Orders", Targets: target.Targets},
		"ttl":       {Instance: "short", Ttl: ptr(30), Targets: target.Targets},
		"type":      {Instance: "six", Type: ptr(public.DNSRecordAAAA), Targets: &[]string{"2001:db8::1"}},
		"address":   {Instance: "four", Type: ptr(public.DNSRecordA), Targets: &[]string{"127.0.0.1"}},
		"both":      {Instance: "both", Targets: target.Targets, ClusterId: ptr("c-1")},
	} {
		resp, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", body, alice)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSRecord("+what+")", e.apiEnv, resp.JSON400, resp.StatusCode(), http.StatusBadRequest, fleet.CodeValidation)
	}
	noCluster, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "follow", ClusterId: ptr("no-such-cluster")}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSRecord(unknown cluster)", e.apiEnv, noCluster.JSON404, noCluster.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)

	// Only writers write: another organisation gets code 33; another
	// organisation's record it does not even find.
	denied, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "mine", Targets: target.Targets}, dave)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSRecord(non-writer)", e.apiEnv, denied.JSON403, denied.StatusCode(), http.StatusForbidden, fleet.CodeDNSWriterNotAllowed)
	deniedDel, err := e.client.DeleteDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, dave)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSRecord(non-writer)", e.apiEnv, deniedDel.JSON404, deniedDel.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	// A writer service account writes from any organisation.
	byCI, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "ci", Type: ptr(public.DNSRecordA),
		Ttl: ptr(60), Targets: &[]string{"198.51.100.10", "198.51.100.11"}}, ci)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(byCI.JSON201).NotTo(gomega.BeNil(), outcome(byCI, err))

	// Reads are the organisation's: a non-writer has none, another writer
	// does not see the record, and cannot take its name.
	for who, tok := range map[string]public.RequestEditorFn{"non-writer": dave, "other writer": carol} {
		list, err := e.client.ListDNSRecordsWithResponse(ctx, "kafka", nil, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(list.JSON200).NotTo(gomega.BeNil(), outcome(list, err))
		g.Expect(list.JSON200.Total).To(gomega.BeZero(), "records %s sees", who)
		get, err := e.client.GetDNSRecordWithResponse(ctx, "kafka", rec.Id, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "GetDNSRecord("+who+")", e.apiEnv, get.JSON404, get.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	}
	otherUpdate, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, public.DNSRecordPatch{Ttl: ptr(120)}, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(other writer)", e.apiEnv, otherUpdate.JSON404, otherUpdate.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	otherDelete, err := e.client.DeleteDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSRecord(other writer)", e.apiEnv, otherDelete.JSON404, otherDelete.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	taken, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "orders",
		Targets: &[]string{"ingress.apps.cluster-9.example.net"}}, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSRecord(another org's name)", e.apiEnv, taken.JSON409, taken.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)
	for _, leak := range []string{"org-a", "alice", "cluster-1", rec.Id} {
		g.Expect(string(taken.Body)).NotTo(gomega.ContainSubstring(leak), "the refusal tells of the other organisation's record")
	}
	// The organisation's own record with another target is a conflict too:
	// creation is idempotent, not an update.
	differs, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "orders", Ttl: ptr(120),
		Targets: target.Targets}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "CreateDNSRecord(other TTL)", e.apiEnv, differs.JSON409, differs.StatusCode(), http.StatusConflict, fleet.CodeNameTaken)

	// A writer removed from the policy reads its records, but changes them
	// no more.
	adm := adminAuth(e.adminToken(t))
	carols, err := e.client.CreateDNSRecordWithResponse(ctx, "kafka", public.DNSRecordCreate{Instance: "carols", Targets: target.Targets}, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(carols.JSON201).NotTo(gomega.BeNil(), outcome(carols, err))
	removed, err := e.admin.UpdateDNSServiceWithResponse(ctx, kafka.Id, nil, admin.DNSServicePatch{WriterOrganizations: &[]string{"org-a"}}, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed.JSON200).NotTo(gomega.BeNil(), outcome(removed, err))
	read, err := e.client.GetDNSRecordWithResponse(ctx, "kafka", carols.JSON201.Id, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(read.JSON200).NotTo(gomega.BeNil(), outcome(read, err))
	formerUpdate, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", carols.JSON201.Id, nil, public.DNSRecordPatch{Ttl: ptr(120)}, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(former writer)", e.apiEnv, formerUpdate.JSON403, formerUpdate.StatusCode(), http.StatusForbidden,
		fleet.CodeDNSWriterNotAllowed)
	formerDelete, err := e.client.DeleteDNSRecordWithResponse(ctx, "kafka", carols.JSON201.Id, nil, carol)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSRecord(former writer)", e.apiEnv, formerDelete.JSON403, formerDelete.StatusCode(), http.StatusForbidden,
		fleet.CodeDNSWriterNotAllowed)

	// An unknown service is 404 whoever asks.
	for _, tok := range []public.RequestEditorFn{alice, dave} {
		list, err := e.client.ListDNSRecordsWithResponse(ctx, "no-such-service", nil, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "ListDNSRecords(unknown service)", e.apiEnv, list.JSON404, list.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
		create, err := e.client.CreateDNSRecordWithResponse(ctx, "no-such-service", target, tok)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		wantError(t, "CreateDNSRecord(unknown service)", e.apiEnv, create.JSON404, create.StatusCode(), http.StatusNotFound, fleet.CodeNotFound)
	}

	// The organisation's list, with search.
	list, err := e.client.ListDNSRecordsWithResponse(ctx, "kafka", &public.ListDNSRecordsParams{Search: ptr("instance = 'orders'")}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.JSON200).NotTo(gomega.BeNil(), outcome(list, err))
	g.Expect(list.JSON200.Total).To(gomega.Equal(1))
	g.Expect(list.JSON200.Items[0].Id).To(gomega.Equal(rec.Id))

	// Changes: an org member changes only what it created; If-Match guards.
	byBob, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, public.DNSRecordPatch{Ttl: ptr(120)}, bob)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(member, not its own)", e.apiEnv, byBob.JSON403, byBob.StatusCode(), http.StatusForbidden, fleet.CodeActionForbidden)
	stale, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, &public.UpdateDNSRecordParams{IfMatch: ptr(fleet.ETag(rec.Generation + 1))},
		public.DNSRecordPatch{Ttl: ptr(120)}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(stale)", e.apiEnv, stale.JSON412, stale.StatusCode(), http.StatusPreconditionFailed, fleet.CodePreconditionFailed)
	updated, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, &public.UpdateDNSRecordParams{IfMatch: ptr(fleet.ETag(rec.Generation))},
		public.DNSRecordPatch{Ttl: ptr(120), Targets: &[]string{"ingress.apps.cluster-2.example.net"}}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(updated.JSON200).NotTo(gomega.BeNil(), outcome(updated, err))
	g.Expect(updated.JSON200.Ttl).To(gomega.Equal(120))
	g.Expect(updated.JSON200.Targets).To(gomega.Equal([]string{"ingress.apps.cluster-2.example.net"}))
	g.Expect(updated.JSON200.Name).To(gomega.Equal(rec.Name))
	g.Expect(updated.JSON200.Generation).To(gomega.Equal(rec.Generation + 1))
	g.Expect(updated.HTTPResponse.Header.Get("ETag")).To(gomega.Equal(fleet.ETag(rec.Generation + 1)))
	badType, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, public.DNSRecordPatch{Type: ptr(public.DNSRecordAAAA)}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(type outside the policy)", e.apiEnv, badType.JSON400, badType.StatusCode(), http.StatusBadRequest,
		fleet.CodeValidation)

	// A policy whose records live is not deleted; the admin sees their count.
	policy, err := e.admin.GetDNSServiceWithResponse(ctx, kafka.Id, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(policy.JSON200).NotTo(gomega.BeNil(), outcome(policy, err))
	g.Expect(policy.JSON200.RecordCount).To(gomega.Equal(3))
	held, err := e.admin.DeleteDNSServiceWithResponse(ctx, kafka.Id, nil, adm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSService(with records)", e.apiEnv, fromAdmin(held.JSON409), held.StatusCode(), http.StatusConflict, fleet.CodeConflict)

	// Deletion is accepted and goes through dns_mgr: the record shows phase
	// deleting, and takes no more changes.
	staleDel, err := e.client.DeleteDNSRecordWithResponse(ctx, "kafka", rec.Id, &public.DeleteDNSRecordParams{IfMatch: ptr(fleet.ETag(rec.Generation))}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "DeleteDNSRecord(stale)", e.apiEnv, staleDel.JSON412, staleDel.StatusCode(), http.StatusPreconditionFailed, fleet.CodePreconditionFailed)
	del, err := e.client.DeleteDNSRecordWithResponse(ctx, "kafka", rec.Id, &public.DeleteDNSRecordParams{IfMatch: ptr(fleet.ETag(rec.Generation + 1))}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(del.StatusCode()).To(gomega.Equal(http.StatusAccepted), outcome(del, err))
	deleting, err := e.client.GetDNSRecordWithResponse(ctx, "kafka", rec.Id, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(deleting.JSON200).NotTo(gomega.BeNil(), outcome(deleting, err))
	g.Expect(deleting.JSON200.Phase).To(gomega.Equal(public.DNSRecordDeleting))
	g.Expect(deleting.JSON200.DeletionRequestedAt).NotTo(gomega.BeNil())
	late, err := e.client.UpdateDNSRecordWithResponse(ctx, "kafka", rec.Id, nil, public.DNSRecordPatch{Ttl: ptr(600)}, alice)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	wantError(t, "UpdateDNSRecord(deleting)", e.apiEnv, late.JSON409, late.StatusCode(), http.StatusConflict, fleet.CodeConflict)
}
