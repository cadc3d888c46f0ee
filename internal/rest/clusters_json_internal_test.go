package rest

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// distinctPublicCluster is a cluster with a value of its own in every
// field, and characters encoding/json escapes, so that a field written as
// another, or escaped otherwise, shows in the answer.
func distinctPublicCluster(t testing.TB, name string, at time.Time) public.Cluster {
	t.Helper()
	str := func(field string) string { return name + "-" + field + " <&>\"é" }
	ptr := func(field string) *string { s := str(field); return &s }
	deletion := at.Add(4 * time.Second)
	c := public.Cluster{
		Kind: public.ClusterKindCluster, Id: str("id"), Href: str("href"), Name: str("name"), DisplayName: str("display"),
		Labels: public.Labels{"env": str("env"), "team": str("team")}, Zone: str("zone"), Region: str("region"),
		Product: public.Product(str("product")), HasCredentials: true, Phase: public.ClusterPhase(str("phase")),
		Conditions: []public.Condition{
			{Type: str("c1-type"), Status: public.ConditionStatus(str("c1-status")), Reason: str("c1-reason"),
				Message: ptr("c1-message"), ObservedGeneration: 3, LastTransitionTime: at.Add(5 * time.Second)},
			{Type: str("c2-type"), Status: public.ConditionStatus(str("c2-status")), Reason: str("c2-reason"),
				ObservedGeneration: 4, LastTransitionTime: at.Add(6 * time.Second).UTC()},
		},
		Generation: 7, ObservedGeneration: 6, CreatedAt: at.Add(time.Second), UpdatedAt: at.Add(2 * time.Second),
		DeletionRequestedAt: &deletion, CreatedBy: ptr("created-by"),
		Hub: &public.HubRef{Id: str("hub-id"), Name: str("hub-name"), Zone: str("hub-zone"), Region: str("hub-region")},
	}
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("distinctPublicCluster leaves public.Cluster.%s unset: give it its value", v.Type().Field(i).Name)
		}
	}
	return c
}

// TestClusterAnswersAreWhatEncodingJSONWrites writes a cluster, and a list
// of it and of a cluster without conditions, hub or deletion, and compares
// each field with what encoding/json writes of the generated types.
func TestClusterAnswersAreWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("east", 2*3600))
	full := distinctPublicCluster(t, "a", at)
	bare := distinctPublicCluster(t, "b", at.Add(time.Minute))
	bare.Conditions, bare.Hub, bare.DeletionRequestedAt, bare.CreatedBy = []public.Condition{}, nil, nil, nil
	list := public.ClusterList{Kind: public.ClusterListKindClusterList, Page: 2, Size: 2, Total: 9, Items: []public.Cluster{full, bare}}
	for _, tc := range []struct {
		name     string
		appended jsonAppender
		want     any
	}{
		{"cluster", clusterJSON(full), full},
		{"cluster without conditions", clusterJSON(bare), bare},
		{"list", clusterListJSON{list: public.ClusterList{Kind: list.Kind, Page: list.Page, Size: list.Size, Total: list.Total},
			items: []clusterJSON{clusterJSON(full), clusterJSON(bare)}}, list},
	} {
		j := newJSONBuilder().(*jsonBuilder)
		if err := tc.appended.appendJSON(j); err != nil {
			t.Fatalf("%s: appendJSON() = %v", tc.name, err)
		}
		want, err := json.Marshal(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		var gotValue, wantValue any
		if err := json.Unmarshal(j.buf.Bytes(), &gotValue); err != nil {
			t.Fatalf("%s: the answer is not JSON: %v\n%s", tc.name, err, j.buf.Bytes())
		}
		if err := json.Unmarshal(want, &wantValue); err != nil {
			t.Fatal(err)
		}
		for _, d := range jsonDiff("", gotValue, wantValue) {
			t.Errorf("%s: %s", tc.name, d)
		}
	}
}

// BenchmarkClusterListEncoding is the answer's half of a page of 100
// clusters with five conditions each: encoding/json of the generated type
// against clusterListJSON.
func BenchmarkClusterListEncoding(b *testing.B) {
	c := distinctPublicCluster(b, "a", time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	c.Conditions = append(c.Conditions, c.Conditions[0], c.Conditions[1], c.Conditions[0])
	items, appended := make([]public.Cluster, 100), make([]clusterJSON, 100)
	for i := range items {
		items[i], appended[i] = c, clusterJSON(c)
	}
	s := &Server{}
	s.builders.New = newJSONBuilder
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), http.StatusOK, public.ClusterList{Items: items})
		}
	})
	b.Run("appended", func(b *testing.B) {
		for b.Loop() {
			if err := s.writeAppendedJSON(httptest.NewRecorder(), http.StatusOK, clusterListJSON{items: appended}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGzipClusterPage is what compressing a page of 100 clusters costs
// the answer (withCompression, at gzip.BestSpeed): the standard library's
// compress/gzip against klauspost/compress's gzip, which the middleware
// uses. Each reports the compressed bytes per page.
func BenchmarkGzipClusterPage(b *testing.B) {
	// Clusters that differ as a fleet's do: ids, names, labels, times.
	rng := rand.New(rand.NewPCG(1, 2))
	items := make([]clusterJSON, 100)
	for i := range items {
		at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC).Add(time.Duration(rng.IntN(1e6)) * time.Second)
		c := distinctPublicCluster(b, fmt.Sprintf("c%x", rng.Uint64()), at)
		c.Id = fmt.Sprintf("%08x-%04x-7%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()>>16)
		c.Labels = public.Labels{"env": []string{"prod", "stage", "dev"}[i%3], "team": fmt.Sprintf("team-%d", rng.IntN(40)),
			"cost-center": fmt.Sprintf("%06d", rng.IntN(1e6))}
		items[i] = clusterJSON(c)
	}
	s := &Server{}
	s.builders.New = newJSONBuilder
	rec := httptest.NewRecorder()
	if err := s.writeAppendedJSON(rec, http.StatusOK, clusterListJSON{items: items}); err != nil {
		b.Fatal(err)
	}
	page := rec.Body.Bytes()
	for _, lib := range []struct {
		name string
		w    func() io.WriteCloser
		rst  func(io.WriteCloser, io.Writer)
	}{
		{"compress/gzip", func() io.WriteCloser { w, _ := stdgzip.NewWriterLevel(nil, stdgzip.BestSpeed); return w },
			func(w io.WriteCloser, to io.Writer) { w.(*stdgzip.Writer).Reset(to) }},
		{"klauspost", func() io.WriteCloser { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w },
			func(w io.WriteCloser, to io.Writer) { w.(*gzip.Writer).Reset(to) }},
	} {
		b.Run(lib.name, func(b *testing.B) {
			w := lib.w()
			var out bytes.Buffer
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				out.Reset()
				lib.rst(w, &out)
				if _, err := w.Write(page); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "gzip-bytes")
			b.ReportMetric(float64(len(page)), "page-bytes")
		})
	}
}
