package rest_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// bodyLimit is the --api-max-body-bytes of the body tests.
const bodyLimit = 2048

// mergePatch is the JSON merge patch media type (RFC 7396).
const mergePatch = "application/merge-patch+json"

// declaredStatus is how a body of mediaType must be answered by the operation
// at path and method of the spec file: 200 when the spec declares the media
// type, else 415 with the unsupported media type code. The server takes
// exactly the content types its specification declares.
func declaredStatus(t *testing.T, file, path, method, mediaType string) (int, fleet.ErrorCode) {
	t.Helper()
	data, err := fs.ReadFile(openapi.Specs, file)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", file, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("LoadFromData(%s): %v", file, err)
	}
	item := doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		t.Fatalf("%s has no operation %s %s", file, method, path)
	}
	if body := item.GetOperation(method).RequestBody; body != nil && body.Value.Content.Get(mediaType) != nil {
		return http.StatusOK, 0
	}
	return http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType
}

// labelsJSON renders n valid labels of 60-character values: about 75 bytes
// each, within the spec's limits, so only the body size can refuse them.
func labelsJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"label-%02d":"%s"`, i, strings.Repeat("v", 60))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestRequestBodies checks how the service reads request bodies: malformed
// JSON, bodies over --api-max-body-bytes, content types it does not take, and
// merge patches exactly where the spec declares them.
func TestRequestBodies(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			f.http.MaxBodyBytes, f.http.AgentMaxBodyBytes, f.http.RegistrationBatchMaxBodyBytes = bodyLimit, bodyLimit, bodyLimit
			e := newStackEnv(t, f)
			tok := e.userToken(t, "org-body", "alice")
			c := e.createCluster(t, tok, public.ClusterCreate{Name: "body", Zone: ptr("eu"), Product: public.OCP})
			hub := e.createAgentHub(t, "body-hub", "eu", 1)
			adminTok, agentTok := e.adminToken(t), e.agentToken(t, deref(hub.AgentIdentity))
			clusterMerge, clusterMergeCode := declaredStatus(t, openapi.Public, "/clusters/{id}", http.MethodPatch, mergePatch)
			hubMerge, hubMergeCode := declaredStatus(t, openapi.Admin, "/admin/hubs/{id}", http.MethodPatch, mergePatch)
			big, small := labelsJSON(40), labelsJSON(20)
			if len(big) <= bodyLimit || len(small) >= bodyLimit-100 {
				t.Fatalf("labelsJSON(): %d and %d bytes, want one over and one under %d", len(big), len(small), bodyLimit)
			}
			cases := []struct {
				call, contentType, body string
				send                    func(contentType string, body io.Reader) (response, *public.Error, error)
				status                  int
				code                    fleet.ErrorCode
			}{
				{"CreateCluster(truncated JSON)", "application/json", `{"name":"x","product":`, e.sendCreate(tok), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"CreateCluster(not JSON)", "application/json", `name=x&product=OCP`, e.sendCreate(tok), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"UpdateCluster(truncated JSON)", "application/json", `{"labels":{`, e.sendPatch(tok, c.Id), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"CreateHub(truncated JSON)", "application/json", `{"name":`, e.sendCreateHub(adminTok), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"PutHubStatus(truncated JSON)", "application/json", `{"agent_version":`, e.sendStatus(agentTok, hub.Id), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"CreateCluster(too large)", "application/json", `{"name":"big","product":"OCP","zone":"eu","labels":` + big + `}`, e.sendCreate(tok), http.StatusRequestEntityTooLarge, fleet.CodeBodyTooLarge},
				{"UpdateCluster(too large)", "application/json", `{"display_name":"big","labels":` + big + `}`, e.sendPatch(tok, c.Id), http.StatusRequestEntityTooLarge, fleet.CodeBodyTooLarge},
				{"CreateClusters(too large)", "application/json", `{"items":[{"name":"big","product":"OCP","zone":"eu","labels":` + big + `}]}`, e.sendBatch(tok), http.StatusRequestEntityTooLarge, fleet.CodeBodyTooLarge},
				{"CreateClusters(truncated JSON)", "application/json", `{"items":[{"name":`, e.sendBatch(tok), http.StatusBadRequest, fleet.CodeMalformedBody},
				{"PutHubStatus(too large)", "application/json", `{"agent_version":"` + strings.Repeat("v", bodyLimit) + `","agent_start_generation":1,"applied_revision":0}`, e.sendStatus(agentTok, hub.Id), http.StatusRequestEntityTooLarge, fleet.CodeBodyTooLarge},
				{"CreateCluster(text/plain)", "text/plain", `{"name":"plain","product":"OCP","zone":"eu"}`, e.sendCreate(tok), http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType},
				{"UpdateCluster(text/plain)", "text/plain", `{"display_name":"plain"}`, e.sendPatch(tok, c.Id), http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType},
				{"CreateHub(application/xml)", "application/xml", `<hub/>`, e.sendCreateHub(adminTok), http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType},
				{"PutHubStatus(text/plain)", "text/plain", `{}`, e.sendStatus(agentTok, hub.Id), http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType},
				{"CreateCluster(merge-patch)", "application/merge-patch+json", `{"name":"mp","product":"OCP","zone":"eu"}`, e.sendCreate(tok), http.StatusUnsupportedMediaType, fleet.CodeUnsupportedMediaType},
				{"CreateCluster(just under the limit)", "application/json", `{"name":"small","product":"OCP","zone":"eu","labels":` + small + `}`, e.sendCreate(tok), http.StatusAccepted, 0},
				{"CreateCluster(charset)", "application/json; charset=utf-8", `{"name":"charset","product":"OCP","zone":"eu"}`, e.sendCreate(tok), http.StatusAccepted, 0},
				{"UpdateCluster(merge-patch)", mergePatch, `{"display_name":"merge-patched"}`, e.sendPatch(tok, c.Id), clusterMerge, clusterMergeCode},
				{"UpdateCluster(application/json)", "application/json", `{"display_name":"merged","labels":{"env":"prod"}}`, e.sendPatch(tok, c.Id), http.StatusOK, 0},
				{"UpdateHub(merge-patch)", mergePatch, `{"capacity":3}`, e.sendPatchHub(adminTok, hub.Id), hubMerge, hubMergeCode},
			}
			for _, tc := range cases {
				resp, body, err := tc.send(tc.contentType, strings.NewReader(tc.body))
				if err != nil {
					t.Fatalf("%s: %v", tc.call, err)
				}
				if tc.code == 0 {
					if resp.StatusCode() != tc.status {
						t.Errorf("%s = %s, want %d", tc.call, outcome(resp, nil), tc.status)
					}
					continue
				}
				wantError(t, tc.call, e.apiEnv, body, resp.StatusCode(), tc.status, tc.code)
			}
			got, err := e.client.GetClusterWithResponse(context.Background(), c.Id, bearer(tok))
			if err != nil || got.JSON200 == nil || got.JSON200.DisplayName != "merged" || got.JSON200.Labels["env"] != "prod" {
				t.Errorf("GetCluster(body) after a merge patch = %s; want display_name merged, env=prod", outcome(got, err))
			}
		})
	}
}

// sendCreate, sendPatch, sendCreateHub, sendPatchHub and sendStatus send a raw
// body with a content type, and pick the error body of the response.
func (e *stackEnv) sendCreate(tok string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.client.CreateClusterWithBodyWithResponse(context.Background(), nil, ct, body, bearer(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(r.JSON400, r.JSON413, r.JSON415), nil
	}
}

func (e *stackEnv) sendBatch(tok string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.client.CreateClustersWithBodyWithResponse(context.Background(), nil, ct, body, bearer(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(r.JSON400, r.JSON413, r.JSON415), nil
	}
}

func (e *stackEnv) sendPatch(tok, id string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.client.UpdateClusterWithBodyWithResponse(context.Background(), id, nil, ct, body, bearer(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(r.JSON400, r.JSON413, r.JSON415), nil
	}
}

func (e *stackEnv) sendCreateHub(tok string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.admin.CreateHubWithBodyWithResponse(context.Background(), ct, body, adminAuth(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(fromAdmin(r.JSON400), fromAdmin(r.JSON413), fromAdmin(r.JSON415)), nil
	}
}

func (e *stackEnv) sendPatchHub(tok, id string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.admin.UpdateHubWithBodyWithResponse(context.Background(), id, &admin.UpdateHubParams{}, ct, body, adminAuth(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(fromAdmin(r.JSON400), fromAdmin(r.JSON413), fromAdmin(r.JSON415)), nil
	}
}

func (e *stackEnv) sendStatus(tok, hubID string) func(string, io.Reader) (response, *public.Error, error) {
	return func(ct string, body io.Reader) (response, *public.Error, error) {
		r, err := e.agent.PutHubStatusWithBodyWithResponse(context.Background(), hubID, ct, body, agentAuth(tok))
		if err != nil {
			return nil, nil, err
		}
		return r, firstError(fromPrivate(r.JSON400), fromPrivate(r.JSON413), fromPrivate(r.JSON415)), nil
	}
}

// firstError returns the first error body that is set.
func firstError(bodies ...*public.Error) *public.Error {
	for _, b := range bodies {
		if b != nil {
			return b
		}
	}
	return nil
}
