// Package ocmtest is a stand-in for OCM in tests: an HTTP server that
// implements the documented contract of the clusters_mgmt external
// configuration SyncSet endpoints and of Red Hat SSO's token endpoint, so that
// tests run ocm-sdk-go's real client against it. There is no public OCM to
// test against.
//
// The SyncSet endpoints are /api/clusters_mgmt/v1/clusters/{id}/external_configuration/syncsets
// (GET lists, POST adds: 201) and .../syncsets/{syncset_id} (GET: 200, PATCH:
// 200, DELETE: 204), with JSON bodies {"kind":"Syncset","id","href","resources"}
// and OCM error bodies {"kind":"Error","id","href","code","reason"}; a
// request without a valid bearer token gets 401. The token endpoint takes the
// OAuth2 client_credentials and refresh_token grants and issues JWT access
// tokens, which ocm-sdk-go parses for their expiry.
package ocmtest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// TokenPath is the path of the token endpoint, as on Red Hat SSO.
const TokenPath = "/auth/realms/redhat-external/protocol/openid-connect/token"

// maxID is the longest SyncSet id OCM takes.
const maxID = 50

// Call is one request the server answered.
type Call struct {
	Method string
	Path   string
	Status int
	// Grant is the grant_type of a token request.
	Grant string
}

// Server is the stand-in OCM and SSO. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server
	key []byte

	mu       sync.Mutex
	clients  map[string]string // client id: secret
	offline  map[string]bool   // valid offline tokens
	access   map[string]bool   // valid access tokens
	clusters map[string]map[string][]any
	faults   []fault
	calls    []Call
	serial   int
}

// fault is an answer to give the next request of method to the SyncSet API.
type fault struct {
	method string
	status int
	reason string
}

// New starts a server, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{key: make([]byte, 32), clients: map[string]string{}, offline: map[string]bool{},
		access: map[string]bool{}, clusters: map[string]map[string][]any{}}
	if _, err := rand.Read(s.key); err != nil {
		t.Fatalf("ocmtest.New: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+TokenPath, s.handleToken)
	base := "/api/clusters_mgmt/v1/clusters/{cluster}/external_configuration/syncsets"
	mux.HandleFunc("GET "+base, s.api(s.handleList))
	mux.HandleFunc("POST "+base, s.api(s.handleAdd))
	mux.HandleFunc("GET "+base+"/{id}", s.api(s.handleGet))
	mux.HandleFunc("PATCH "+base+"/{id}", s.api(s.handleUpdate))
	mux.HandleFunc("DELETE "+base+"/{id}", s.api(s.handleDelete))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API's base URL (the api_url of an OCM target).
func (s *Server) URL() string { return s.srv.URL }

// TokenURL is the token endpoint's URL.
func (s *Server) TokenURL() string { return s.srv.URL + TokenPath }

// SyncSetPath is the path of a cluster's SyncSet.
func SyncSetPath(clusterID, id string) string {
	return "/api/clusters_mgmt/v1/clusters/" + clusterID + "/external_configuration/syncsets/" + id
}

// SyncSetsPath is the path of a cluster's SyncSet collection.
func SyncSetsPath(clusterID string) string {
	return "/api/clusters_mgmt/v1/clusters/" + clusterID + "/external_configuration/syncsets"
}

// AddCluster makes a cluster known; the SyncSets of others are 404.
func (s *Server) AddCluster(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters[id] == nil {
		s.clusters[id] = map[string][]any{}
	}
}

// AddClient registers an OAuth client for the client_credentials grant.
func (s *Server) AddClient(id, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[id] = secret
}

// IssueOfflineToken returns a new offline token (a JWT of type Offline,
// without expiry) for the refresh_token grant.
func (s *Server) IssueOfflineToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	token := s.sign(jwt.MapClaims{"typ": "Offline"})
	s.offline[token] = true
	return token
}

// RevokeAccessTokens makes every access token issued so far invalid, though
// not expired: the API answers 401 until the client gets a new one.
func (s *Server) RevokeAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
}

// Fail makes the next request of method to the SyncSet API, once
// authenticated, answer status with an OCM error body giving reason.
func (s *Server) Fail(method string, status int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, status: status, reason: reason})
}

// PutSyncSet stores a SyncSet as if a client had created it.
func (s *Server) PutSyncSet(clusterID, id string, resources []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters[clusterID] == nil {
		s.clusters[clusterID] = map[string][]any{}
	}
	s.clusters[clusterID][id] = resources
}

// SyncSet returns the resources of a stored SyncSet, as JSON decodes them.
func (s *Server) SyncSet(clusterID, id string) ([]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.clusters[clusterID][id]
	return r, ok
}

// SyncSetIDs lists a cluster's SyncSet ids.
func (s *Server) SyncSetIDs(clusterID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.clusters[clusterID]))
}

// Calls returns the requests answered so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// ResetCalls forgets the requests answered so far.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// sign issues a JWT with claims plus an id and issue time; s.mu is held.
func (s *Server) sign(claims jwt.MapClaims) string {
	s.serial++
	claims["jti"] = strconv.Itoa(s.serial)
	claims["iat"] = time.Now().Unix()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	if err != nil {
		panic(fmt.Sprintf("ocmtest: signing a token: %v", err))
	}
	return token
}

// handleToken is the token endpoint: client_credentials with the client in
// basic auth (or the form), refresh_token with an offline token.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grant := r.PostFormValue("grant_type")
	status, body := http.StatusOK, map[string]any(nil)
	switch grant {
	case "client_credentials":
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		if want, known := s.clients[id]; !known || id == "" || secret != want {
			status, body = http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "Invalid client or Invalid client credentials"}
			break
		}
		body = s.issue(id)
	case "refresh_token":
		offline := r.PostFormValue("refresh_token")
		if !s.offline[offline] {
			status, body = http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "Offline user session not found"}
			break
		}
		body = s.issue(r.PostFormValue("client_id"))
		body["refresh_token"] = offline
	default:
		status, body = http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type", "error_description": "Unsupported grant_type"}
	}
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Status: status, Grant: grant})
	writeJSON(w, status, body)
}

// issue returns a token response with a new access token; s.mu is held.
func (s *Server) issue(client string) map[string]any {
	access := s.sign(jwt.MapClaims{"typ": "Bearer", "azp": client, "exp": time.Now().Add(15 * time.Minute).Unix()})
	s.access[access] = true
	return map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 900}
}

// apiHandler serves an authenticated SyncSet request of a known cluster and
// returns the status it answered; s.mu is held.
type apiHandler func(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int

// api authenticates a request, applies a pending fault, serves it with h
// and records it.
func (s *Server) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		status := s.serveAPI(w, r, h)
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Status: status})
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, h apiHandler) int {
	auth := r.Header.Get("Authorization")
	if len(auth) < 7 || auth[:7] != "Bearer " || !s.access[auth[7:]] {
		return writeError(w, r, http.StatusUnauthorized, "Invalid or missing access token")
	}
	if i := slices.IndexFunc(s.faults, func(f fault) bool { return f.method == r.Method }); i >= 0 {
		f := s.faults[i]
		s.faults = slices.Delete(s.faults, i, i+1)
		return writeError(w, r, f.status, f.reason)
	}
	syncsets := s.clusters[r.PathValue("cluster")]
	if syncsets == nil {
		return writeError(w, r, http.StatusNotFound, fmt.Sprintf("Cluster '%s' not found", r.PathValue("cluster")))
	}
	return h(w, r, syncsets)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int {
	items := []any{}
	for _, id := range slices.Sorted(maps.Keys(syncsets)) {
		items = append(items, syncSetBody(r.PathValue("cluster"), id, syncsets[id]))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"kind": "SyncsetList", "page": 1, "size": len(items), "total": len(items), "items": items})
}

func (s *Server) handleAdd(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int {
	in, status, reason := readSyncSet(r)
	switch {
	case status != 0:
		return writeError(w, r, status, reason)
	case in.ID == "" || len(in.ID) > maxID:
		return writeError(w, r, http.StatusBadRequest, fmt.Sprintf("Syncset id '%s' must be 1 to %d characters", in.ID, maxID))
	case in.Resources == nil:
		return writeError(w, r, http.StatusBadRequest, "Syncset resources are required")
	case has(syncsets, in.ID):
		return writeError(w, r, http.StatusConflict, fmt.Sprintf("Syncset '%s' already exists", in.ID))
	}
	syncsets[in.ID] = *in.Resources
	return writeJSON(w, http.StatusCreated, syncSetBody(r.PathValue("cluster"), in.ID, *in.Resources))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int {
	id := r.PathValue("id")
	resources, ok := syncsets[id]
	if !ok {
		return writeError(w, r, http.StatusNotFound, fmt.Sprintf("Syncset '%s' not found", id))
	}
	return writeJSON(w, http.StatusOK, syncSetBody(r.PathValue("cluster"), id, resources))
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int {
	id := r.PathValue("id")
	if _, ok := syncsets[id]; !ok {
		return writeError(w, r, http.StatusNotFound, fmt.Sprintf("Syncset '%s' not found", id))
	}
	in, status, reason := readSyncSet(r)
	if status != 0 {
		return writeError(w, r, status, reason)
	}
	if in.Resources != nil {
		syncsets[id] = *in.Resources
	}
	return writeJSON(w, http.StatusOK, syncSetBody(r.PathValue("cluster"), id, syncsets[id]))
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, syncsets map[string][]any) int {
	id := r.PathValue("id")
	if _, ok := syncsets[id]; !ok {
		return writeError(w, r, http.StatusNotFound, fmt.Sprintf("Syncset '%s' not found", id))
	}
	delete(syncsets, id)
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

func has(syncsets map[string][]any, id string) bool {
	_, ok := syncsets[id]
	return ok
}

// syncSetIn is a SyncSet request body.
type syncSetIn struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	Resources *[]any `json:"resources"`
}

// readSyncSet decodes a SyncSet body; status is 0 when it is acceptable.
func readSyncSet(r *http.Request) (syncSetIn, int, string) {
	var in syncSetIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return in, http.StatusBadRequest, fmt.Sprintf("Syncset body is not valid JSON: %v", err)
	}
	if in.Kind != "" && in.Kind != "Syncset" {
		return in, http.StatusBadRequest, fmt.Sprintf("kind '%s' is not Syncset", in.Kind)
	}
	if in.Resources != nil {
		for i, res := range *in.Resources {
			if obj, ok := res.(map[string]any); !ok || obj["kind"] == nil || obj["apiVersion"] == nil {
				return in, http.StatusBadRequest, fmt.Sprintf("resources[%d] is not a Kubernetes object", i)
			}
		}
	}
	return in, 0, ""
}

func syncSetBody(clusterID, id string, resources []any) map[string]any {
	return map[string]any{"kind": "Syncset", "id": id, "href": SyncSetPath(clusterID, id), "resources": resources}
}

// writeError writes an OCM error body and returns status.
func writeError(w http.ResponseWriter, r *http.Request, status int, reason string) int {
	code := strconv.Itoa(status)
	return writeJSON(w, status, map[string]any{
		"kind": "Error", "id": code, "href": "/api/clusters_mgmt/v1/errors/" + code,
		"code": "CLUSTERS-MGMT-" + code, "reason": reason, "operation_id": r.Header.Get("X-Operation-Id"),
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
	return status
}
