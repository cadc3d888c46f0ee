package postgres_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// fastReadEnv is an inventory whose rows hold, in every column the fast
// reads select, a value no other column holds: a column read into another
// field of its type shows as a field with another field's value.
type fastReadEnv struct {
	*orgFeedEnv
	org  fleet.Identity
	want map[string]fleet.ManagedClusterChange // by cluster id, as written
	pos  map[string]string                     // cluster id -> the cursor of its change position
}

// newFastReadEnv writes, after enough changes the organisation cannot see
// that its feed's first page is read from its own hubs and registrations
// (readOrgSources), a cluster on a hub it owns, one of its registration's
// on a shared hub and a tombstone on its hub.
func newFastReadEnv(t *testing.T) *fastReadEnv {
	e := &fastReadEnv{orgFeedEnv: newOrgFeedEnv(t), org: fleet.Identity{OrgID: "rt-org", Username: "u"},
		want: map[string]fleet.ManagedClusterChange{}, pos: map[string]string{}}
	owned := e.newHub("rt-owned-hub", "rt-owned-zone", e.org.OrgID)
	shared := e.newHub("rt-shared-hub", "rt-shared-zone", "")
	ownedReg, sharedReg := e.place(e.org.OrgID, "rt-owned-reg", owned), e.place(e.org.OrgID, "rt-shared-reg", shared)
	e.exec(`INSERT INTO managed_clusters (hub_id, name, content_hash) SELECT ?, 'filler-' || i, '' FROM generate_series(1, 30) i`,
		e.inventoryEnv.hub.ID)
	base := time.Date(2026, 3, 4, 5, 6, 7, 891000, time.UTC)
	for i, h := range []fleet.Hub{owned, shared} {
		e.exec(`UPDATE hubs SET last_inventory_at = ?, inventory_stale = true WHERE id = ?`, base.Add(time.Duration(100+i)*time.Hour), h.ID)
	}
	e.write(0, "rt-owned", owned, ownedReg, base, false)
	e.write(1, "rt-shared", shared, sharedReg, base, false)
	e.write(2, "rt-gone", owned, ownedReg, base, true)
	var positions []struct{ ID, Xid, Seq string }
	if err := e.db.Gorm.Raw(`SELECT id, change_xid::text AS xid, change_seq::text AS seq FROM managed_clusters`).Scan(&positions).Error; err != nil {
		t.Fatal(err)
	}
	for _, p := range positions {
		var xid uint64
		var seq int64
		if _, err := fmt.Sscan(p.Xid, &xid); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(p.Seq, &seq); err != nil {
			t.Fatal(err)
		}
		e.pos[p.ID] = postgres.CursorForTest(xid, seq)
	}
	return e
}

// write inserts cluster name, the i-th, on hub, linked to reg, with a value
// of its own in every column, tombstoned when gone, and records it.
func (e *fastReadEnv) write(i int, name string, hub fleet.Hub, reg string, base time.Time, gone bool) {
	e.t.Helper()
	at := func(n int) time.Time { return base.Add(time.Duration(10*i+n) * time.Second) }
	c := fleet.ManagedCluster{
		ID: name + "-id", Hub: fleet.HubRef{ID: hub.ID, Name: hub.Name, Zone: hub.Zone, Region: hub.Region},
		Name: name, UID: name + "-uid", ClusterID: name + "-cluster-id", RegistrationID: reg,
		Labels:            fleet.StringMapJSON(`{"label": "` + name + `-labels"}`),
		Claims:            fleet.StringMapJSON(`{"claim": "` + name + `-claims"}`),
		Capacity:          fleet.StringMapJSON(`{"cpu": "` + name + `-capacity"}`),
		Allocatable:       fleet.StringMapJSON(`{"cpu": "` + name + `-allocatable"}`),
		Conditions:        fleet.ConditionsJSON(`[{"type": "` + name + `-conditions"}]`),
		KubernetesVersion: name + "-kubernetes", OpenShiftVersion: name + "-openshift", Platform: name + "-platform",
		Product: name + "-product", Region: name + "-region", ConsoleURL: "https://" + name + ".console",
		Joined: fleet.ConditionTrue, Available: fleet.ConditionFalse, Stale: true,
		CreatedAt: at(1), UpdatedAt: at(2), LastSeenAt: base.Add(100 * time.Hour),
	}
	if hub.OwnerOrgID == "" {
		c.LastSeenAt = base.Add(101 * time.Hour)
	}
	change := fleet.ManagedClusterChange{Cluster: c}
	if gone {
		deleted := at(3)
		change.DeletedAt = &deleted
	}
	e.exec(`INSERT INTO managed_clusters (id, hub_id, name, uid, registration_id, cluster_id, labels, claims, capacity,
		allocatable, conditions, kubernetes_version, openshift_version, platform, product, region, console_url, joined,
		available, content_hash, created_at, updated_at, deleted_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)`,
		c.ID, c.Hub.ID, c.Name, c.UID, c.RegistrationID, c.ClusterID, string(c.Labels), string(c.Claims), string(c.Capacity),
		string(c.Allocatable), string(c.Conditions), c.KubernetesVersion, c.OpenShiftVersion, c.Platform, c.Product, c.Region,
		c.ConsoleURL, string(c.Joined), string(c.Available), c.CreatedAt, c.UpdatedAt, change.DeletedAt)
	e.want[c.ID] = change
}

// fieldValues is every field of v (a struct), nested structs other than
// time.Time flattened, by dotted name, as text.
func fieldValues(v reflect.Value, prefix string, out map[string]string) {
	for i := range v.NumField() {
		f, name := v.Field(i), prefix+v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]():
			fieldValues(f, name+".", out)
		case f.Kind() == reflect.Pointer && !f.IsNil():
			out[name] = fmt.Sprint(f.Elem().Interface())
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			out[name] = string(f.Bytes())
		case f.IsZero():
			out[name] = ""
		default:
			out[name] = fmt.Sprint(f.Interface())
		}
	}
}

// diffFields names the fields of got and want that differ, with both values.
func diffFields(got, want fleet.ManagedClusterChange) []string {
	g, w := map[string]string{}, map[string]string{}
	fieldValues(reflect.ValueOf(got), "", g)
	fieldValues(reflect.ValueOf(want), "", w)
	var diff []string
	for name, wv := range w {
		if g[name] != wv {
			diff = append(diff, fmt.Sprintf("%s = %q, want %q", name, g[name], wv))
		}
	}
	slices.Sort(diff)
	return diff
}

// checkFixture checks that every field of a written change (a cluster and
// its deletion) is set, and to a value no other field holds, so that a field
// added to fleet.ManagedCluster is given one in write too.
func (e *fastReadEnv) checkFixture() {
	e.t.Helper()
	values := map[string]string{}
	fieldValues(reflect.ValueOf(e.want["rt-gone-id"]), "", values)
	seen := map[string]string{}
	for name, v := range values {
		if v == "" {
			e.t.Errorf("the fixture leaves %s unset", name)
		}
		if other, dup := seen[v]; dup {
			e.t.Errorf("the fixture gives %s and %s one value, %q", name, other, v)
		}
		seen[v] = name
	}
}

// TestFastReadsReturnWhatWasWritten reads the rows newFastReadEnv wrote
// through every fast read (get by id, an administrator's page with and
// without a search, an organisation's page, both feeds and both paths of
// the organisation's) and compares each field with what was written; and
// each position, through the cursor of a page of one. A column swapped
// with another of its type in a column list shows here. It first checks
// that the rows hold a distinct value in every field (checkFixture).
func TestFastReadsReturnWhatWasWritten(t *testing.T) {
	t.Parallel()
	e := newFastReadEnv(t)
	e.checkFixture()
	ctx := context.Background()
	admin := fleet.Identity{OrgID: "sre", Username: "admin"}
	check := func(read string, got fleet.ManagedClusterChange) {
		t.Helper()
		want, ok := e.want[got.Cluster.ID]
		if !ok {
			return // another row: a filler
		}
		if !strings.HasPrefix(read, "ListManagedClusterChanges") {
			want.DeletedAt = nil
		}
		for _, d := range diffFields(got, want) {
			t.Errorf("%s: %s: %s", read, got.Cluster.Name, d)
		}
	}
	live := []string{"rt-owned-id", "rt-shared-id"}
	for _, id := range live {
		for _, who := range []struct {
			caller fleet.Identity
			admin  bool
		}{{admin, true}, {e.org, false}} {
			c, err := e.store.GetManagedCluster(ctx, who.caller, who.admin, id)
			if err != nil {
				t.Fatalf("GetManagedCluster(%s, admin %v, %s): %v", who.caller.OrgID, who.admin, id, err)
			}
			check(fmt.Sprintf("GetManagedCluster(admin %v)", who.admin), fleet.ManagedClusterChange{Cluster: c})
		}
	}
	for _, l := range []struct {
		read   string
		caller fleet.Identity
		admin  bool
		q      fleet.ListQuery
	}{
		{"ListManagedClusters(admin)", admin, true, fleet.ListQuery{Size: 100}},
		{"ListManagedClusters(admin, search)", admin, true, fleet.ListQuery{Size: 100, Search: "name like 'rt-%'"}},
		{"ListManagedClusters(org)", e.org, false, fleet.ListQuery{Size: 100}},
		{"ListManagedClusters(org, search)", e.org, false, fleet.ListQuery{Size: 100, Search: "name like 'rt-%'"}},
	} {
		page, err := e.store.ListManagedClusters(ctx, l.caller, l.admin, l.q)
		if err != nil {
			t.Fatalf("%s: %v", l.read, err)
		}
		var ids []string
		for _, c := range page.Items {
			check(l.read, fleet.ManagedClusterChange{Cluster: c})
			if _, ours := e.want[c.ID]; ours {
				ids = append(ids, c.ID)
			}
		}
		if slices.Sort(ids); !slices.Equal(ids, live) {
			t.Errorf("%s listed %v of the written rows; want %v", l.read, ids, live)
		}
	}
	for _, f := range []struct {
		read   string
		caller fleet.Identity
		admin  bool
		size   int
	}{
		{"ListManagedClusterChanges(admin, size 1)", admin, true, 1},
		{"ListManagedClusterChanges(admin)", admin, true, 100},
		// A page of one walks fewer changes than the fillers: the first is
		// read from the organisation's hubs and registrations, the next by
		// the walk.
		{"ListManagedClusterChanges(org, size 1)", e.org, false, 1},
		{"ListManagedClusterChanges(org)", e.org, false, 100},
	} {
		var ids []string
		after := ""
		for range 100 {
			page, err := e.store.ListManagedClusterChanges(ctx, f.caller, f.admin, after, f.size)
			if err != nil {
				t.Fatalf("%s after %q: %v", f.read, after, err)
			}
			for _, c := range page.Items {
				check(f.read, c)
				if _, ours := e.want[c.Cluster.ID]; ours {
					ids = append(ids, c.Cluster.ID)
				}
			}
			// The cursor's position, without the WAL position it also carries.
			pos, _, err := postgres.CursorLSNForTest(page.Cursor, 0)
			if err != nil {
				t.Fatalf("%s: cursor %q: %v", f.read, page.Cursor, err)
			}
			if f.size == 1 && len(page.Items) == 1 && pos != e.pos[page.Items[0].Cluster.ID] {
				t.Errorf("%s: the cursor after %s is not its position", f.read, page.Items[0].Cluster.Name)
			}
			if len(page.Items) < f.size {
				break
			}
			after = page.Cursor
		}
		if want := []string{"rt-owned-id", "rt-shared-id", "rt-gone-id"}; !slices.Equal(ids, want) {
			t.Errorf("%s gave %v of the written rows; want %v, in the order written", f.read, ids, want)
		}
	}
}
