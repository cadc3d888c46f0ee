package rest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// TestTimeFieldWritesWhatEncodingJSONWrites compares the answers' times,
// written without time.Time's Marshaler, with what encoding/json writes for
// the same times: UTC and other offsets, with and without fractions.
func TestTimeFieldWritesWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	east := time.FixedZone("east", 5*3600+30*60)
	for _, tm := range []time.Time{
		time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC),
		time.Date(1999, 1, 2, 3, 4, 5, 6, east),
		time.Date(2026, 6, 30, 23, 59, 59, 999999999, time.FixedZone("west", -7*3600)),
	} {
		j := newJSONBuilder().(*jsonBuilder)
		j.buf.WriteByte('{')
		j.timeField("at", tm)
		want, err := json.Marshal(map[string]time.Time{"at": tm})
		if err != nil {
			t.Fatal(err)
		}
		if got := j.buf.String() + "}"; got != string(want) {
			t.Errorf("timeField(%v) = %s; encoding/json writes %s", tm, got, want)
		}
	}
}

// distinctCluster is a cluster with a value of its own in every field, so
// that a field written as another shows in the answer.
func distinctCluster(name string, at time.Time) fleet.ManagedCluster {
	doc := func(key, field string) fleet.StringMapJSON {
		return fleet.StringMapJSON(`{"` + key + `": "` + name + `-` + field + `"}`)
	}
	return fleet.ManagedCluster{
		ID: name + "-id", Name: name, UID: name + "-uid", ClusterID: name + "-cluster-id", RegistrationID: name + "-registration-id",
		Hub:    fleet.HubRef{ID: name + "-hub-id", Name: name + "-hub-name", Zone: name + "-hub-zone", Region: name + "-hub-region"},
		Labels: doc("label", "labels"), Claims: doc("claim", "claims"), Capacity: doc("cpu", "capacity"),
		Allocatable: doc("cpu", "allocatable"),
		Conditions: fleet.ConditionsJSON(`[{"type": "` + name + `-condition-type", "status": "` + name + `-condition-status", ` +
			`"reason": "` + name + `-condition-reason", "message": "` + name + `-condition-message", ` +
			`"last_transition_time": "2026-02-03T04:05:06.7Z"}]`),
		KubernetesVersion: name + "-kubernetes", OpenShiftVersion: name + "-openshift", Platform: name + "-platform",
		Product: name + "-product", Region: name + "-region", ConsoleURL: "https://" + name + ".console",
		Joined: fleet.ConditionTrue, Available: fleet.ConditionFalse, Stale: true,
		LastSeenAt: at.Add(3 * time.Second), CreatedAt: at.Add(time.Second), UpdatedAt: at.Add(2 * time.Second),
	}
}

// encodedCluster is c as the generated type, every field set by hand here,
// the documents decoded: what encoding/json writes of it is the answer's
// contract.
// hrefServer presents clusters with hrefs under its base path.
var hrefServer = &Server{cfg: Config{BasePath: "/api/fleet_manager/v1"}}

func encodedCluster(t *testing.T, c fleet.ManagedCluster) public.ManagedCluster {
	t.Helper()
	p := public.ManagedCluster{
		Kind: public.ManagedClusterKindManagedCluster, Id: c.ID, Href: hrefServer.cfg.BasePath + "/managed_clusters/" + c.ID, Name: c.Name,
		Hub:       public.HubRef{Id: c.Hub.ID, Name: c.Hub.Name, Zone: c.Hub.Zone, Region: c.Hub.Region},
		ClusterId: &c.ClusterID, RegistrationId: &c.RegistrationID, KubernetesVersion: &c.KubernetesVersion,
		OpenshiftVersion: &c.OpenShiftVersion, Platform: &c.Platform, Product: &c.Product, Region: &c.Region,
		ConsoleUrl: &c.ConsoleURL, Joined: public.ManagedClusterJoined(c.Joined), Available: public.ManagedClusterAvailable(c.Available),
		Stale: c.Stale, LastSeenAt: c.LastSeenAt, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
	for _, d := range []struct {
		doc  []byte
		into any
	}{{c.Labels, &p.Labels}, {c.Claims, &p.Claims}, {c.Capacity, &p.Capacity}, {c.Allocatable, &p.Allocatable}, {c.Conditions, &p.Conditions}} {
		if err := json.Unmarshal(d.doc, d.into); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", d.doc, err)
		}
	}
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("encodedCluster leaves public.ManagedCluster.%s unset: give it its value", v.Type().Field(i).Name)
		}
	}
	return p
}

// jsonDiff lists where the JSON values got and want differ, by path.
func jsonDiff(path string, got, want any) []string {
	gm, gok := got.(map[string]any)
	wm, wok := want.(map[string]any)
	if gok && wok {
		var out []string
		for k := range wm {
			out = append(out, jsonDiff(path+"."+k, gm[k], wm[k])...)
		}
		for k := range gm {
			if _, ok := wm[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s = %v, want none", path, k, gm[k]))
			}
		}
		return out
	}
	ga, gok := got.([]any)
	wa, wok := want.([]any)
	if gok && wok && len(ga) == len(wa) {
		var out []string
		for i := range wa {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), ga[i], wa[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("%s = %v, want %v", path, got, want)}
	}
	return nil
}

// TestAppendedAnswersAreWhatEncodingJSONWrites writes a cluster, a list and
// a change list whose every field holds a value of its own, and compares
// each field with what encoding/json writes of the generated types: a field
// presented or appended as another shows, which the answers' validation
// against the OpenAPI document cannot see when the two have one type.
func TestAppendedAnswersAreWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("east", 2*3600))
	a, b := distinctCluster("a", at), distinctCluster("b", at.Add(time.Minute))
	seen := map[string]string{}
	v := reflect.ValueOf(a)
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		text := fmt.Sprint(f.Interface())
		if f.Kind() == reflect.Slice {
			text = string(f.Bytes())
		}
		if f.IsZero() {
			t.Errorf("distinctCluster leaves %s unset", name)
		}
		if other, dup := seen[text]; dup {
			t.Errorf("distinctCluster gives %s and %s one value, %s", name, other, text)
		}
		seen[text] = name
	}
	deleted := at.Add(time.Hour)
	cursor := "the-cursor"
	cases := []struct {
		name     string
		appended jsonAppender
		encoded  any
	}{
		{"a cluster", hrefServer.presentManagedCluster(a), encodedCluster(t, a)},
		{"a list", managedClusterListJSON{
			list:  public.ManagedClusterList{Kind: public.ManagedClusterListKindManagedClusterList, Page: 3, Size: 2, Total: 41, Cursor: &cursor},
			items: []managedClusterJSON{hrefServer.presentManagedCluster(a), hrefServer.presentManagedCluster(b)},
		}, public.ManagedClusterList{Kind: public.ManagedClusterListKindManagedClusterList, Page: 3, Size: 2, Total: 41, Cursor: &cursor,
			Items: []public.ManagedCluster{encodedCluster(t, a), encodedCluster(t, b)}}},
		{"a change list", managedClusterChangeListJSON{
			list: public.ManagedClusterChangeList{Kind: public.ManagedClusterChangeListKindManagedClusterChangeList, Size: 2, Cursor: cursor},
			items: []managedClusterChangeJSON{
				{change: public.ManagedClusterChange{DeletedAt: &deleted}, cluster: hrefServer.presentManagedCluster(a)},
				{cluster: hrefServer.presentManagedCluster(b)},
			},
		}, public.ManagedClusterChangeList{Kind: public.ManagedClusterChangeListKindManagedClusterChangeList, Size: 2, Cursor: cursor,
			Items: []public.ManagedClusterChange{{Cluster: encodedCluster(t, a), DeletedAt: &deleted}, {Cluster: encodedCluster(t, b)}}}},
	}
	for _, tc := range cases {
		j := newJSONBuilder().(*jsonBuilder)
		if err := tc.appended.appendJSON(j); err != nil {
			t.Fatalf("%s: appendJSON() = %v", tc.name, err)
		}
		want, err := json.Marshal(tc.encoded)
		if err != nil {
			t.Fatal(err)
		}
		var gotValue, wantValue any
		if err := json.Unmarshal(j.buf.Bytes(), &gotValue); err != nil {
			t.Fatalf("%s: appendJSON() wrote invalid JSON (%v): %s", tc.name, err, j.buf.Bytes())
		}
		if err := json.Unmarshal(want, &wantValue); err != nil {
			t.Fatal(err)
		}
		diff := jsonDiff("", gotValue, wantValue)
		slices.Sort(diff)
		for _, d := range diff {
			t.Errorf("%s: %s", tc.name, d)
		}
	}
}
