package hydratest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// CreateClient registers an OAuth2 client that may use the client
// credentials grant, authenticating with HTTP basic auth, for audience (none
// when empty) and scopes. The client is deleted when the test ends, so a
// client id can be reused by a later test (or -count=2).
func (h *Hydra) CreateClient(t testing.TB, clientID, secret, audience string, scopes ...string) {
	t.Helper()
	body := map[string]any{
		"client_id":                  clientID,
		"client_secret":              secret,
		"grant_types":                []string{"client_credentials"},
		"response_types":             []string{"token"},
		"token_endpoint_auth_method": "client_secret_basic",
		"scope":                      strings.Join(scopes, " "),
	}
	if audience != "" {
		body["audience"] = []string{audience}
	}
	payload, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("CreateClient(%s): %v", clientID, err)
	}
	resp, err := h.http.Post(h.admin+"/admin/clients", "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("CreateClient(%s): %v", clientID, err)
	}
	answer := readAll(resp)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("CreateClient(%s): POST /admin/clients = %s: %s", clientID, resp.Status, answer)
	}
	h.mu.Lock()
	h.scopes[clientID] = append([]string(nil), scopes...)
	h.mu.Unlock()
	t.Cleanup(func() { h.deleteClient(t, clientID) })
}

// deleteClient removes a client created by CreateClient.
func (h *Hydra) deleteClient(t testing.TB, clientID string) {
	h.mu.Lock()
	delete(h.scopes, clientID)
	h.mu.Unlock()
	req, err := http.NewRequest(http.MethodDelete, h.admin+"/admin/clients/"+url.PathEscape(clientID), nil)
	if err != nil {
		t.Errorf("deleteClient(%s): %v", clientID, err)
		return
	}
	resp, err := h.http.Do(req)
	if err != nil {
		t.Errorf("deleteClient(%s): %v", clientID, err)
		return
	}
	answer := readAll(resp)
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleteClient(%s): DELETE = %s: %s", clientID, resp.Status, answer)
	}
}

// Token returns a signed JWT access token for the client from the client
// credentials grant, for audience (none when empty) and every scope the
// client was created with.
func (h *Hydra) Token(t testing.TB, clientID, secret, audience string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	h.mu.Lock()
	if scopes := h.scopes[clientID]; len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	h.mu.Unlock()
	if audience != "" {
		form.Set("audience", audience)
	}
	req, err := http.NewRequest(http.MethodPost, h.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("Token(%s): %v", clientID, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 section 2.3.1: both halves are form-encoded before basic auth.
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, err := h.http.Do(req)
	if err != nil {
		t.Fatalf("Token(%s): %v", clientID, err)
	}
	answer := readAll(resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Token(%s): POST %s = %s: %s", clientID, h.TokenURL(), resp.Status, answer)
	}
	var token struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(answer, &token); err != nil || token.AccessToken == "" {
		t.Fatalf("Token(%s): answer %s: %v", clientID, answer, err)
	}
	return token.AccessToken
}

// readAll reads and closes the body; errors show up as a short body.
func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return data
}
