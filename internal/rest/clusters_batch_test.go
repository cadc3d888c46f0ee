package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// createBatch registers items through POST /clusters:batch, with key as its
// Idempotency-Key when not empty.
func (e *apiEnv) createBatch(t *testing.T, tok, key string, items ...public.ClusterCreate) *public.CreateClustersResponse {
	t.Helper()
	params := &public.CreateClustersParams{}
	if key != "" {
		params.IdempotencyKey = &key
	}
	resp, err := e.client.CreateClustersWithResponse(context.Background(), params, public.ClusterBatchCreate{Items: items}, bearer(tok))
	if err != nil {
		t.Fatalf("CreateClusters(%d items) = %v", len(items), err)
	}
	return resp
}

// batchResults returns the items of a 200 answer, failing t on any other,
// after checking that they answer the request's items in order.
func batchResults(t *testing.T, resp *public.CreateClustersResponse, n int) []public.ClusterBatchItemResult {
	t.Helper()
	if resp.JSON200 == nil {
		t.Fatalf("CreateClusters() = %s; want 200", outcome(resp, nil))
	}
	got := resp.JSON200
	if got.Kind != public.ClusterBatchResultKindClusterBatchResult || len(got.Items) != n {
		t.Fatalf("CreateClusters() = kind %s, %d items; want ClusterBatchResult with %d", got.Kind, len(got.Items), n)
	}
	for i, it := range got.Items {
		if it.Index != i || (it.Status == http.StatusAccepted) != (it.Cluster != nil) || (it.Cluster == nil) == (it.Error == nil) {
			t.Errorf("CreateClusters() item %d = index %d, status %d, cluster %v, error %v; want index %d and a cluster with 202, else an error",
				i, it.Index, it.Status, it.Cluster != nil, it.Error, i)
		}
	}
	return got.Items
}

// wantItemError checks item's status and error code.
func wantItemError(t *testing.T, e *apiEnv, call string, item public.ClusterBatchItemResult, status int, code fleet.ErrorCode) {
	t.Helper()
	wantError(t, call, e, item.Error, item.Status, status, code)
}

func TestClusterBatch(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			f.http.RegistrationBatchMax = 5
			e := newStackEnv(t, f)
			t.Run("per_item_results", func(t *testing.T) { testClusterBatchItems(t, e) })
			t.Run("idempotency", func(t *testing.T) { testClusterBatchIdempotency(t, e) })
			t.Run("refused_whole", func(t *testing.T) { testClusterBatchRefused(t, e) })
		})
	}
}

func testClusterBatchItems(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-batch", "alice")
	e.createCluster(t, tok, public.ClusterCreate{Name: "taken", Zone: ptr("eu"), Product: public.OCP})
	items := []public.ClusterCreate{
		{Name: "b-one", DisplayName: ptr("One"), Labels: &public.Labels{"env": "prod"}, Zone: ptr("eu"), Region: ptr("eu-west-1"), Product: public.ROSA,
			Credentials: &public.ImportCredentials{Kubeconfig: ptr(testKubeconfig)}},
		{Name: "Not_A_DNS_Label", Zone: ptr("eu"), Product: public.OCP},
		{Name: "taken", Zone: ptr("eu"), Product: public.OCP},
		{Name: "b-one", Zone: ptr("eu"), Product: public.OCP},
		{Name: "b-two", Zone: ptr("eu"), Product: public.OCP, Labels: &public.Labels{"fleet-manager.io/x": "y"}},
	}
	resp := e.createBatch(t, tok, "", items...)
	got := batchResults(t, resp, len(items))
	wantItemError(t, e.apiEnv, "CreateClusters() item 1 (bad name)", got[1], 400, fleet.CodeValidation)
	wantItemError(t, e.apiEnv, "CreateClusters() item 2 (name taken)", got[2], 409, fleet.CodeNameTaken)
	wantItemError(t, e.apiEnv, "CreateClusters() item 3 (name of item 0)", got[3], 409, fleet.CodeNameTaken)
	wantItemError(t, e.apiEnv, "CreateClusters() item 4 (reserved label)", got[4], 400, fleet.CodeValidation)
	if got[0].Status != http.StatusAccepted || got[0].Cluster == nil {
		t.Fatalf("CreateClusters() item 0 = %d %v, want 202 and the cluster", got[0].Status, got[0].Error)
	}
	c := *got[0].Cluster
	if c.Name != "b-one" || c.DisplayName != "One" || c.Labels["env"] != "prod" || c.Region != "eu-west-1" || c.Product != public.ROSA ||
		!c.HasCredentials || c.Phase != public.Accepted || c.Generation != 1 || deref(c.CreatedBy) != "alice" || c.Href != e.http.BasePath+"/clusters/"+c.Id {
		t.Errorf("CreateClusters() item 0 = %+v, want b-one as asked, accepted, with credentials", c)
	}
	if !hasCondition(c, fleet.ConditionAccepted, public.ConditionStatusTrue, fleet.ReasonValidated) {
		t.Errorf("CreateClusters() item 0: %s, want Accepted=True (Validated)", describeCluster(c))
	}
	// Each refused item answers what POST /clusters answers for it alone.
	for _, i := range []int{1, 2, 3, 4} {
		alone, err := e.client.CreateClusterWithResponse(ctx, nil, items[i], bearer(tok))
		if err != nil {
			t.Fatalf("CreateCluster(item %d) = %v", i, err)
		}
		var aloneErr public.Error
		if err := json.Unmarshal(alone.Body, &aloneErr); err != nil || got[i].Error == nil ||
			alone.StatusCode() != got[i].Status || aloneErr.Code != got[i].Error.Code {
			t.Errorf("CreateCluster(item %d) alone = %d %s; the batch answered %d %+v", i, alone.StatusCode(), alone.Body, got[i].Status, got[i].Error)
			continue
		}
		// Item 3's reason names the item of the batch that took its name.
		if i != 3 && aloneErr.Reason != got[i].Error.Reason {
			t.Errorf("CreateCluster(item %d) alone: reason %q; the batch's is %q", i, aloneErr.Reason, got[i].Error.Reason)
		}
	}
	assertNoSecrets(t, e, tok, c, resp.Body, []string{kubeconfigSecret})
	if n := clusterTotal(t, e, tok, ""); n != 2 {
		t.Errorf("ListClusters() after the batch: total = %d, want 2 (taken, b-one)", n)
	}
}

func testClusterBatchIdempotency(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-batch-key", "alice")
	e.createCluster(t, tok, public.ClusterCreate{Name: "k-taken", Zone: ptr("eu"), Product: public.OCP})
	items := []public.ClusterCreate{
		{Name: "k-a", Zone: ptr("eu"), Product: public.OCP},
		{Name: "k-taken", Zone: ptr("eu"), Product: public.OCP},
		{Name: "k-b", Zone: ptr("eu"), Product: public.OCP},
	}
	first := batchResults(t, e.createBatch(t, tok, "onboard-1", items...), 3)
	again := batchResults(t, e.createBatch(t, tok, "onboard-1", items...), 3)
	for _, i := range []int{0, 2} {
		if first[i].Cluster == nil || again[i].Status != http.StatusAccepted || again[i].Cluster == nil || again[i].Cluster.Id != first[i].Cluster.Id {
			t.Errorf("CreateClusters(onboard-1) again: item %d = %d %+v, want 202 replaying the first answer's cluster", i, again[i].Status, again[i].Error)
		}
	}
	wantItemError(t, e.apiEnv, "CreateClusters(onboard-1) again: item 1", again[1], 409, fleet.CodeNameTaken)
	if n := clusterTotal(t, e, tok, ""); n != 3 {
		t.Errorf("ListClusters() after a retried batch: total = %d, want 3", n)
	}
	// Item i is registered under <key>/<i>: a single create with that key replays it.
	single, err := e.client.CreateClusterWithResponse(ctx, &public.CreateClusterParams{IdempotencyKey: ptr("onboard-1/2")}, items[2], bearer(tok))
	if err != nil || single.JSON202 == nil || single.JSON202.Id != first[2].Cluster.Id || single.HTTPResponse.Header.Get("Idempotency-Replayed") != "true" {
		t.Errorf("CreateCluster(k-b, key onboard-1/2) = %s; want the replay of %s", outcome(single, err), first[2].Cluster.Id)
	}
	// Another body under the key refuses the items it changes.
	changed := append([]public.ClusterCreate(nil), items...)
	changed[0].Name = "k-other"
	res := batchResults(t, e.createBatch(t, tok, "onboard-1", changed...), 3)
	wantItemError(t, e.apiEnv, "CreateClusters(onboard-1, item 0 changed): item 0", res[0], 409, fleet.CodeIdempotencyKeyReused)
	if res[2].Cluster == nil || res[2].Cluster.Id != first[2].Cluster.Id {
		t.Errorf("CreateClusters(onboard-1, item 0 changed): item 2 = %d %+v, want the replay", res[2].Status, res[2].Error)
	}
}

func testClusterBatchRefused(t *testing.T, e *stackEnv) {
	ctx := context.Background()
	tok := e.userToken(t, "org-batch-refused", "alice")
	item := func(i int) public.ClusterCreate {
		return public.ClusterCreate{Name: fmt.Sprintf("r-%d", i), Zone: ptr("eu"), Product: public.OCP}
	}
	over := make([]public.ClusterCreate, e.http.RegistrationBatchMax+1)
	for i := range over {
		over[i] = item(i)
	}
	resp := e.createBatch(t, tok, "over", over...)
	wantError(t, "CreateClusters(one item over the limit)", e.apiEnv, resp.JSON400, resp.StatusCode(), 400, fleet.CodeValidation)
	if resp.JSON400 != nil && !strings.Contains(resp.JSON400.Reason, fmt.Sprintf("at most %d items", e.http.RegistrationBatchMax)) {
		t.Errorf("CreateClusters(one item over the limit) reason = %q, want it to name the limit", resp.JSON400.Reason)
	}
	resp = e.createBatch(t, tok, "")
	wantError(t, "CreateClusters(no item)", e.apiEnv, resp.JSON400, resp.StatusCode(), 400, fleet.CodeValidation)
	resp, err := e.client.CreateClustersWithResponse(ctx, nil, public.ClusterBatchCreate{Items: []public.ClusterCreate{item(0)}})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "CreateClusters(no token)", e.apiEnv, resp.JSON401, resp.StatusCode(), 401, fleet.CodeUnauthenticated)
	bad, err := e.client.CreateClustersWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"items":[{"name":"r-x","product":"OCP"}`), bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, "CreateClusters(truncated JSON)", e.apiEnv, bad.JSON400, bad.StatusCode(), 400, fleet.CodeMalformedBody)
	user := map[string]string{"Authorization": "Bearer " + tok}
	for _, body := range []string{`null`, `[]`, `{}`, `{"items":null}`, `{"items":[]}`, `{"items":{}}`, `{"items":[],"more":1}`} {
		got := e.rawCall(t, "POST", "/clusters:batch", user, body)
		wantRefused(t, e.apiEnv, "CreateClusters("+body+")", got, 400, fleet.CodeValidation)
	}
	got := e.rawCall(t, "POST", "/clusters:batch", user, `{"items":[5,"x",{"name":"r-0","product":"OCP","zone":"eu","extra":1}]}`)
	var items public.ClusterBatchResult
	if err := json.Unmarshal([]byte(got.body), &items); err != nil || got.status != 200 || len(items.Items) != 3 {
		t.Fatalf("CreateClusters(items not ClusterCreate) = %d %s, want 200 with 3 results", got.status, got.body)
	}
	for i, it := range items.Items {
		wantItemError(t, e.apiEnv, fmt.Sprintf("CreateClusters(items not ClusterCreate) item %d", i), it, 400, fleet.CodeValidation)
	}
	if n := clusterTotal(t, e, tok, ""); n != 0 {
		t.Errorf("ListClusters() after refused batches: total = %d, want 0", n)
	}
	// A batch's body may be larger than a single create's.
	big := make([]public.ClusterCreate, e.http.RegistrationBatchMax)
	for i := range big {
		big[i] = item(i)
		big[i].DisplayName = ptr(strings.Repeat("d", 256))
		big[i].Credentials = &public.ImportCredentials{Kubeconfig: ptr(strings.Repeat("k", int(e.http.MaxBodyBytes)/4))}
	}
	body, _ := json.Marshal(public.ClusterBatchCreate{Items: big})
	if int64(len(body)) <= e.http.MaxBodyBytes {
		t.Fatalf("the large batch is %d bytes, want more than --api-max-body-bytes %d", len(body), e.http.MaxBodyBytes)
	}
	large, err := e.client.CreateClustersWithBodyWithResponse(ctx, nil, "application/json", bytes.NewReader(body), bearer(tok))
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range batchResults(t, large, len(big)) {
		if it.Status != http.StatusAccepted {
			t.Errorf("CreateClusters(large) item %d = %d %+v, want 202", i, it.Status, it.Error)
		}
	}
}

func TestClusterBatchQuota(t *testing.T) {
	t.Parallel()
	f := flavours()[0]
	f.authz.Preflight.MaxRegistrationsPerOrg = 4
	e := newStackEnv(t, f)
	tok := e.userToken(t, "org-batch-quota", "alice")
	e.createCluster(t, tok, public.ClusterCreate{Name: "q-0", Zone: ptr("eu"), Product: public.OCP})
	items := make([]public.ClusterCreate, 5)
	for i := range items {
		items[i] = public.ClusterCreate{Name: fmt.Sprintf("q-%d", i+1), Zone: ptr("eu"), Product: public.OCP}
	}
	got := batchResults(t, e.createBatch(t, tok, "", items...), len(items))
	for i, it := range got {
		if i < 3 && it.Status != http.StatusAccepted {
			t.Errorf("CreateClusters(quota 4, 1 live) item %d = %d %+v, want 202", i, it.Status, it.Error)
		}
		if i >= 3 {
			wantItemError(t, e.apiEnv, fmt.Sprintf("CreateClusters(quota 4, 1 live) item %d", i), it, 403, fleet.CodeQuotaExceeded)
		}
	}
	if n := clusterTotal(t, e, tok, ""); n != 4 {
		t.Errorf("ListClusters() after the batch: total = %d, want the quota, 4", n)
	}
	// An organisation that may not register at all fails the whole batch.
	f.authz.Preflight.DeniedOrgs = []string{"org-denied"}
	denied := newStackEnv(t, f)
	dtok := denied.userToken(t, "org-denied", "dan")
	resp := denied.createBatch(t, dtok, "", items...)
	wantError(t, "CreateClusters(denied org)", denied.apiEnv, resp.JSON403, resp.StatusCode(), 403, fleet.CodeOrgNotAllowed)
	if n := clusterTotal(t, denied, dtok, ""); n != 0 {
		t.Errorf("ListClusters() of a denied org: total = %d, want 0", n)
	}
}

// TestClusterBatchDelivered: the registrations of a batch are placed,
// published and delivered by the reconcilers as single creates are.
func TestClusterBatchDelivered(t *testing.T) {
	t.Parallel()
	e := newStackEnv(t, flavours()[0])
	e.startReconcilers(t)
	hubs := []string{e.createAgentHub(t, "batch-eu-1", "eu", 20).Id, e.createAgentHub(t, "batch-eu-2", "eu", 20).Id}
	for _, id := range hubs {
		e.heartbeat(t, e.getHub(t, id), 0)
	}
	tok := e.userToken(t, "org-batch-deliver", "alice")
	items := make([]public.ClusterCreate, 30)
	for i := range items {
		items[i] = public.ClusterCreate{Name: fmt.Sprintf("d-%02d", i), Zone: ptr("eu"), Product: public.OCP,
			Credentials: &public.ImportCredentials{ApiUrl: ptr("https://api.d.example.test:6443"), Token: ptr(tokenSecret)}}
	}
	for i, it := range batchResults(t, e.createBatch(t, tok, "deliver", items...), len(items)) {
		if it.Status != http.StatusAccepted {
			t.Fatalf("CreateClusters() item %d = %d %+v, want 202", i, it.Status, it.Error)
		}
	}
	delivered := func() int {
		resp, err := e.client.ListClustersWithResponse(context.Background(), &public.ListClustersParams{Size: ptr(50)}, bearer(tok))
		if err != nil || resp.JSON200 == nil {
			return -1
		}
		n := 0
		for _, c := range resp.JSON200.Items {
			if c.Hub != nil && hasCondition(c, fleet.ConditionDelivered, public.ConditionStatusTrue, fleet.ReasonAcknowledged) {
				n++
			}
		}
		return n
	}
	g := gomega.NewWithT(t)
	g.Eventually(func() int {
		placed := 0
		for _, id := range hubs {
			h := e.getHub(t, id)
			placed += h.PlacedCount
			e.heartbeat(t, h, h.Revision)
		}
		if placed != len(items) {
			return -placed
		}
		return delivered()
	}).WithTimeout(waitFor).WithPolling(100*time.Millisecond).Should(gomega.Equal(len(items)), "registrations of the batch placed and delivered")
}
