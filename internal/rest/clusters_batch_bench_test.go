package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// BenchmarkClusterBatch registers batches of 1000 clusters, each with an API
// URL and a token, through the API server and the generated client (its
// answers validated against the spec, as every test's):
//
//	go test -run '^$' -bench BenchmarkClusterBatch -benchtime 10x ./internal/rest
func BenchmarkClusterBatch(b *testing.B) {
	e := newStackEnv(b, flavours()[0])
	tok := e.userToken(b, "org-bench", "alice")
	for n := 0; b.Loop(); n++ {
		items := make([]public.ClusterCreate, 1000)
		for i := range items {
			items[i] = public.ClusterCreate{Name: fmt.Sprintf("b%d-%d", n, i), Zone: ptr("eu"), Product: public.OCP,
				Labels:      &public.Labels{"env": "prod"},
				Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api.bench.example.com:6443"), Token: ptr("sha256~bench")}}
		}
		resp, err := e.client.CreateClustersWithResponse(context.Background(), &public.CreateClustersParams{IdempotencyKey: ptr(fmt.Sprint("b", n))},
			public.ClusterBatchCreate{Items: items}, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			b.Fatalf("CreateClusters() = %s", outcome(resp, err))
		}
		for i, it := range resp.JSON200.Items {
			if it.Status != http.StatusAccepted {
				b.Fatalf("CreateClusters() item %d = %d %+v", i, it.Status, it.Error)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
}
