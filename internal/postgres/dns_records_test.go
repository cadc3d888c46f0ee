package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// seedPoolCluster inserts a live capacity-pool cluster id of org, on its
// own hub, whose ClusterDeployment reports consoleURL (none when empty).
func seedPoolCluster(t *testing.T, db *postgres.DB, org, id, consoleURL string) {
	t.Helper()
	args := map[string]any{"hub": "hub-" + id, "id": id, "org": org, "url": consoleURL}
	for _, stmt := range strings.Split(seedPoolClusterSQL, ";\n") {
		if err := db.Gorm.Exec(stmt, args).Error; err != nil {
			t.Fatalf("seeding pool cluster %s: %v", id, err)
		}
	}
}

// seedPoolClusterSQL is seedPoolCluster's, one statement a line's end.
const seedPoolClusterSQL = `
INSERT INTO hubs (id, name, zone, region, delivery_mode, capacity, agent_identity) VALUES (@hub, @hub, 'eu', 'eu-west-1', 'agent', 100, @hub);
INSERT INTO registrations (id, org_id, owner, name, zone, product, hub_id, phase) VALUES (@id, @org, 'u', 'r-' || @id, 'eu', 'ocp', @hub, 'ready');
INSERT INTO blueprints (id, org_id, name) VALUES ('bp-' || @id, @org, 'bp-' || @id);
INSERT INTO blueprint_versions (blueprint_id, version, spec) VALUES ('bp-' || @id, 1, '{}');
INSERT INTO capacity_pools (id, org_id, name, zone, cloud, region, blueprint_id, blueprint_version, min_clusters, max_clusters, units_per_cluster)
VALUES ('pool-' || @id, @org, 'pool-' || @id, 'eu', 'aws', 'eu-west-1', 'bp-' || @id, 1, 0, 10, 60);
INSERT INTO pool_clusters (registration_id, pool_id, org_id, cluster_name, blueprint_version, replicas, capacity_units)
VALUES (@id, 'pool-' || @id, @org, 'mc-' || @id, 1, '{}', 60);
INSERT INTO resources (hub_id, zone, api_group, version, kind, namespace, name, cluster_name, body, content_hash)
SELECT @hub, 'eu', 'hive.openshift.io', 'v1', 'ClusterDeployment', 'mc-' || @id, 'mc-' || @id, 'mc-' || @id,
	jsonb_build_object('status', jsonb_build_object('webConsoleURL', CAST(@url AS text))), 'h' WHERE CAST(@url AS text) <> ''`

func TestDNSRecordsAreCreatedIdempotentlyPerName(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a", "org-b")
	orgA, orgB := fleet.Identity{OrgID: "org-a", Username: "alice"}, fleet.Identity{OrgID: "org-b", Username: "bob"}

	rec, created, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", Targets: []string{"LB.Example.NET."}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created).To(gomega.BeTrue())
	g.Expect(rec.Name).To(gomega.Equal("i1.shop.example.com"))
	g.Expect(rec.Type).To(gomega.Equal(fleet.DNSRecordCNAME))
	g.Expect(rec.TTL).To(gomega.Equal(fleet.DNSDefaultTTL))
	g.Expect(rec.Targets).To(gomega.Equal([]string{"lb.example.net"}))
	g.Expect(rec.ServiceName).To(gomega.Equal("shop"))
	g.Expect(rec.OrgID).To(gomega.Equal("org-a"))
	g.Expect(rec.CreatedBy).To(gomega.Equal("alice"))
	g.Expect(rec.Generation).To(gomega.Equal(int64(1)))
	g.Expect(rec.Values).To(gomega.BeEmpty())
	g.Expect(rec.Phase()).To(gomega.Equal(fleet.DNSPhasePending))
	g.Expect(rec.Conditions.Status(fleet.DNSConditionAccepted)).To(gomega.Equal(fleet.ConditionTrue))
	g.Expect(rec.Conditions.Reason(fleet.DNSConditionPublished)).To(gomega.Equal(fleet.DNSReasonPending))
	g.Expect(rec.Conditions.Status(fleet.DNSConditionResolvable)).To(gomega.Equal(fleet.ConditionUnknown))

	// The same request again is the same record.
	again, created, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", Type: fleet.DNSRecordCNAME, TTL: 300, Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created).To(gomega.BeFalse())
	g.Expect(again.ID).To(gomega.Equal(rec.ID))

	// Another request for the name is refused alike, whoever asks.
	_, _, ownErr := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", TTL: 60, Targets: []string{"lb.example.net"}})
	g.Expect(codeOf(ownErr)).To(gomega.Equal(fleet.CodeNameTaken))
	_, _, otherErr := store.CreateDNSRecord(ctx, orgB, shop.Name, fleet.DNSRecordCreate{Instance: "i1", Targets: []string{"lb.example.net"}})
	g.Expect(codeOf(otherErr)).To(gomega.Equal(fleet.CodeNameTaken))
	g.Expect(fleet.ErrorMessageOf(otherErr)).To(gomega.Equal(fleet.ErrorMessageOf(ownErr)), "the refusal tells nothing of the holder")
	g.Expect(fleet.ErrorMessageOf(otherErr)).NotTo(gomega.Or(gomega.ContainSubstring("org-a"), gomega.ContainSubstring("i1")))

	for _, tc := range []struct {
		caller fleet.Identity
		create fleet.DNSRecordCreate
		code   fleet.ErrorCode
	}{
		{fleet.Identity{Username: "nobody"}, fleet.DNSRecordCreate{Instance: "i2", Targets: []string{"lb.example.net"}}, fleet.CodeOrgNotAllowed},
		{orgA, fleet.DNSRecordCreate{Instance: "I_2", Targets: []string{"lb.example.net"}}, fleet.CodeValidation},
		{orgA, fleet.DNSRecordCreate{Instance: "i2", Type: fleet.DNSRecordA, Targets: []string{"::1"}}, fleet.CodeValidation},
		{orgA, fleet.DNSRecordCreate{Instance: "i2", TTL: 1, Targets: []string{"lb.example.net"}}, fleet.CodeValidation},
		{orgA, fleet.DNSRecordCreate{Instance: "i2", ClusterID: "no-such-cluster"}, fleet.CodeNotFound},
	} {
		_, _, err := store.CreateDNSRecord(ctx, tc.caller, shop.Name, tc.create)
		g.Expect(codeOf(err)).To(gomega.Equal(tc.code), "CreateDNSRecord(%+v) = %v", tc.create, err)
	}

	// Addresses are kept as a set, in their canonical form.
	a, _, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i2", Type: fleet.DNSRecordAAAA, Targets: []string{"2001:DB8::2", "2001:db8:0::1"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(a.Targets).To(gomega.Equal([]string{"2001:db8::1", "2001:db8::2"}))
	same, created, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i2", Type: fleet.DNSRecordAAAA, Targets: []string{"2001:db8::1", "2001:db8::2"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created).To(gomega.BeFalse())
	g.Expect(same.ID).To(gomega.Equal(a.ID))
}

func TestDNSRecordsBelongToTheirOrganisation(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a", "org-b")
	orgA, orgB := fleet.Identity{OrgID: "org-a"}, fleet.Identity{OrgID: "org-b"}
	var ids []string
	for _, c := range []fleet.DNSRecordCreate{
		{Instance: "web", Targets: []string{"lb.example.net"}},
		{Instance: "api", Type: fleet.DNSRecordA, Targets: []string{"192.0.2.2", "192.0.2.1"}},
		{Instance: "db", Type: fleet.DNSRecordA, TTL: 60, Targets: []string{"192.0.2.3"}},
	} {
		r, _, err := store.CreateDNSRecord(ctx, orgA, shop.Name, c)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		ids = append(ids, r.ID)
	}
	_, _, err := store.CreateDNSRecord(ctx, orgB, shop.Name, fleet.DNSRecordCreate{Instance: "b", Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	instances := func(recs []fleet.DNSRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Instance)
		}
		return out
	}
	for _, tc := range []struct {
		org   string
		q     fleet.ListQuery
		total int
		want  []string
	}{
		{"org-a", fleet.ListQuery{}, 3, []string{"web", "api", "db"}},
		{"org-a", fleet.ListQuery{OrderBy: "instance desc"}, 3, []string{"web", "db", "api"}},
		{"org-a", fleet.ListQuery{OrderBy: "instance", Page: 2, Size: 2}, 3, []string{"web"}},
		{"org-a", fleet.ListQuery{Search: "type = 'A' and ttl < 100"}, 1, []string{"db"}},
		{"org-a", fleet.ListQuery{Search: "name = 'api.shop.example.com'"}, 1, []string{"api"}},
		{"org-a", fleet.ListQuery{Search: "instance in ('web', 'b') and phase = 'pending'"}, 1, []string{"web"}},
		{"org-b", fleet.ListQuery{}, 1, []string{"b"}},
		{"", fleet.ListQuery{}, 0, nil},
	} {
		recs, total, err := store.ListDNSRecords(ctx, tc.org, shop, tc.q)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "ListDNSRecords(%s, %+v)", tc.org, tc.q)
		g.Expect(total).To(gomega.Equal(tc.total), "ListDNSRecords(%s, %+v)", tc.org, tc.q)
		g.Expect(instances(recs)).To(gomega.Equal(tc.want), "ListDNSRecords(%s, %+v)", tc.org, tc.q)
	}
	_, _, err = store.ListDNSRecords(ctx, "org-a", shop, fleet.ListQuery{Search: "owner = 'x'"})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeBadSearch))
	_, _, err = store.ListDNSRecords(ctx, "org-a", shop, fleet.ListQuery{OrderBy: "targets"})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeBadOrderBy))

	// Another organisation neither reads nor writes them.
	web := ids[0]
	_, err = store.FindDNSRecord(ctx, orgB.OrgID, shop, web)
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	_, err = store.FindDNSRecord(ctx, "", shop, web)
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	ttl := 60
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, orgB.OrgID, shop.Name, web, nil, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	g.Expect(codeOf(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, orgB.OrgID, shop.Name, web, nil))).To(gomega.Equal(fleet.CodeNotFound))
	found, err := store.FindDNSRecord(ctx, orgA.OrgID, shop, web)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(found.TTL).To(gomega.Equal(fleet.DNSDefaultTTL))
	g.Expect(found.DeletionRequestedAt).To(gomega.BeNil())

	// Updates: If-Match, policy checks, a new generation pending again.
	stale := int64(3)
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, &stale, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodePreconditionFailed))
	tooShort := 1
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, nil, fleet.DNSRecordUpdate{TTL: &tooShort})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeValidation))
	updated, err := store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, &found.Generation, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(updated.Generation).To(gomega.Equal(int64(2)))
	g.Expect(updated.TTL).To(gomega.Equal(60))
	published, _ := updated.Conditions.Get(fleet.DNSConditionPublished)
	g.Expect(published.ObservedGeneration).To(gomega.Equal(int64(2)))
	unchanged, err := store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, nil, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(unchanged.Generation).To(gomega.Equal(int64(2)), "a request that changes nothing makes no generation")
	// Another record's name is not the updated one's to take.
	_, _, err = store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "web", TTL: 60, Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the updated record is what the request asks for")

	// Deletion: If-Match, then the row stays, deleting, until dns_mgr is done.
	g.Expect(codeOf(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, &stale))).To(gomega.Equal(fleet.CodePreconditionFailed))
	g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, &updated.Generation)).To(gomega.Succeed())
	g.Expect(store.RequestDNSRecordDeletion(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, nil)).To(gomega.Succeed(), "asked again")
	deleting, err := store.FindDNSRecord(ctx, orgA.OrgID, shop, web)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(deleting.Phase()).To(gomega.Equal(fleet.DNSPhaseDeleting))
	g.Expect(deleting.Generation).To(gomega.Equal(int64(3)))
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, web, nil, fleet.DNSRecordUpdate{TTL: &tooShort})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeConflict))
	_, _, err = store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "web", TTL: 60, Targets: []string{"lb.example.net"}})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeConflict), "its name is free once the record is gone")
	recs, _, err := store.ListDNSRecords(ctx, orgA.OrgID, shop, fleet.ListQuery{Search: "phase = 'deleting'"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(instances(recs)).To(gomega.Equal([]string{"web"}))
}

func TestDNSRecordsFollowTheirOrganisationsPoolClusters(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a", "org-b")
	seedPoolCluster(t, db, "org-a", "cl-a", "")
	seedPoolCluster(t, db, "org-b", "cl-b", "")
	seedPoolCluster(t, db, "org-a", "cl-gone", "")
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET deletion_requested_at = now() WHERE id = 'cl-gone'`).Error).To(gomega.Succeed())
	orgA := fleet.Identity{OrgID: "org-a"}

	for _, cluster := range []string{"cl-b", "cl-gone", "cl-x"} {
		_, _, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", ClusterID: cluster})
		g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound), "CreateDNSRecord(cluster %s)", cluster)
	}
	_, _, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", Type: fleet.DNSRecordA, ClusterID: "cl-a"})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeValidation))
	rec, created, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", ClusterID: "cl-a"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(created).To(gomega.BeTrue())
	g.Expect(rec.ClusterID).To(gomega.Equal("cl-a"))
	g.Expect(rec.Targets).To(gomega.BeEmpty())

	other := "cl-b"
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, rec.ID, nil, fleet.DNSRecordUpdate{ClusterID: &other})
	g.Expect(codeOf(err)).To(gomega.Equal(fleet.CodeNotFound))
	targets := []string{"lb.example.net"}
	moved, err := store.UpdateDNSRecord(ctx, fleet.Permitted, orgA.OrgID, shop.Name, rec.ID, nil, fleet.DNSRecordUpdate{Targets: &targets})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved.ClusterID).To(gomega.BeEmpty())
	g.Expect(moved.Targets).To(gomega.Equal(targets))
}

// The store implements the DNS contract.
var _ interface {
	fleet.DNSAdmin
	fleet.DNSRecords
	fleet.DNSQueue
} = (*postgres.Store)(nil)

// TestDNSRecordsConcurrentCreatesMakeOneRecord sends the same create at once
// from many callers: one creates the record, the others get it back.
func TestDNSRecordsConcurrentCreatesMakeOneRecord(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a")
	const racers = 8
	type result struct {
		id      string
		created bool
		err     error
	}
	results := make([]result, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, created, err := store.CreateDNSRecord(ctx, fleet.Identity{OrgID: "org-a"}, shop.Name,
				fleet.DNSRecordCreate{Instance: "i1", Targets: []string{"lb.example.net"}})
			results[i] = result{r.ID, created, err}
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i, r := range results {
		g.Expect(r.err).NotTo(gomega.HaveOccurred(), "racer %d", i)
		g.Expect(r.id).To(gomega.Equal(results[0].id), "racer %d", i)
		if r.created {
			created++
		}
	}
	g.Expect(created).To(gomega.Equal(1))
}

// TestDNSRecordWritesCheckTheWritersTheWriteReads: a record's create,
// change and deletion check the caller against the service's writers as the
// write itself reads the service, not as a read before it found them: an
// organisation the service dropped writes nothing, and its record stays as
// it was.
func TestDNSRecordWritesCheckTheWritersTheWriteReads(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, _ := newStoreOn(t, nil)
	_, shop := mustDNSService(t, store, "example.com", "shop", "org-a", "org-b")
	orgA := fleet.Identity{OrgID: "org-a", Username: "alice"}
	rec, _, err := store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i1", Targets: []string{"lb.example.net"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	// The handler read the service with org-a among its writers; then an
	// admin drops org-a.
	_, err = store.UpdateDNSService(ctx, shop.ID, nil, fleet.DNSServiceUpdate{WriterOrgs: &[]string{"org-b"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	_, _, err = store.CreateDNSRecord(ctx, orgA, shop.Name, fleet.DNSRecordCreate{Instance: "i2", Targets: []string{"lb.example.net"}})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeDNSWriterNotAllowed), "create: %v", err)
	ttl := 600
	_, err = store.UpdateDNSRecord(ctx, fleet.Permitted, "org-a", shop.Name, rec.ID, nil, fleet.DNSRecordUpdate{TTL: &ttl})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeDNSWriterNotAllowed), "update: %v", err)
	err = store.RequestDNSRecordDeletion(ctx, fleet.Permitted, "org-a", shop.Name, rec.ID, nil)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeDNSWriterNotAllowed), "deletion: %v", err)

	got, err := store.FindDNSRecord(ctx, "org-a", shop, rec.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.TTL).To(gomega.Equal(rec.TTL))
	g.Expect(got.Generation).To(gomega.Equal(rec.Generation))
	g.Expect(got.DeletionRequestedAt).To(gomega.BeNil())
	list, total, err := store.ListDNSRecords(ctx, "org-a", shop, fleet.ListQuery{Size: 10})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(total).To(gomega.Equal(1))
	g.Expect(list).To(gomega.HaveLen(1))
}
