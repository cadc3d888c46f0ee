package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/cli"
	"github.com/fleetmanager/fleet-manager/internal/oidc/hydratest"
)

// offlineRedirect is where the authorization code flow of the offline-token
// test ends; nothing listens there, the test reads the code off the redirect.
const offlineRedirect = "http://127.0.0.1:1/callback"

// TestFleetctlOfflineTokenLogin logs in with an offline (refresh) token that
// Hydra issued through the authorization code flow, played with Hydra's
// admin API as a login and consent app would: fleetctl exchanges it with the
// refresh_token grant, keeps the rotated refresh token, and renews an expired
// access token the same way.
func TestFleetctlOfflineTokenLogin(t *testing.T) {
	hydra := hydratest.Start(t)
	fm := startFleetManager(t, hydra)
	refresh := hydraOfflineToken(t, hydra, "fleetctl-offline", "secret-of-fleetctl-offline", "carol")
	ctl := newFleetctl(t)

	code, _, errOut := ctl.run("login", "--url", strings.TrimSuffix(fm.Base, cli.DefaultAPIPath), "--token-url", hydra.TokenURL(),
		"--client-id", "fleetctl-offline", "--client-secret", "secret-of-fleetctl-offline", "--offline-token", refresh)
	if code != 0 {
		t.Fatalf("login --offline-token = exit %d, %q", code, errOut)
	}
	var me struct {
		Subject string `json:"subject"`
	}
	ctl.json(&me, "whoami")
	if me.Subject != "carol" {
		t.Errorf("whoami subject = %q, want carol", me.Subject)
	}
	cfg, err := cli.LoadConfig(ctl.config)
	if err != nil || cfg.AccessToken == "" || cfg.RefreshToken == "" || cfg.RefreshToken == refresh {
		t.Fatalf("config after login = access %v, refresh kept %v, %v; want a token and Hydra's rotated refresh token",
			cfg != nil && cfg.AccessToken != "", cfg != nil && cfg.RefreshToken == refresh, err)
	}

	expired := *cfg
	expired.Expiry = time.Now().Add(-time.Minute)
	if err := cli.SaveConfig(ctl.config, &expired); err != nil {
		t.Fatal(err)
	}
	ctl.json(&me, "whoami")
	after, err := cli.LoadConfig(ctl.config)
	if err != nil || after.AccessToken == cfg.AccessToken || after.RefreshToken == cfg.RefreshToken || !after.Expiry.After(time.Now()) {
		t.Errorf("config after a command with an expired token: new access %v, new refresh %v, expiry %v, %v",
			after.AccessToken != cfg.AccessToken, after.RefreshToken != cfg.RefreshToken, after.Expiry, err)
	}
}

// hydraOfflineToken registers an authorization-code client at Hydra and
// returns a refresh token for subject, playing the login and consent app
// with Hydra's admin API.
func hydraOfflineToken(t *testing.T, hydra *hydratest.Hydra, clientID, secret, subject string) string {
	t.Helper()
	admin := &http.Client{Timeout: 30 * time.Second}
	call := func(method, target string, body any) map[string]any {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(method, target, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s = %s: %s", method, target, resp.Status, out)
		}
		var v map[string]any
		if len(out) > 0 {
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
		}
		return v
	}
	call(http.MethodPost, hydra.AdminURL()+"/admin/clients", map[string]any{
		"client_id": clientID, "client_secret": secret, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "redirect_uris": []string{offlineRedirect}, "scope": "openid offline_access",
		"audience": []string{audience}, "token_endpoint_auth_method": "client_secret_basic",
	})
	t.Cleanup(func() {
		req, err := http.NewRequest(http.MethodDelete, hydra.AdminURL()+"/admin/clients/"+url.PathEscape(clientID), nil)
		if err == nil {
			if resp, err := admin.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
	})

	// The browser: keeps Hydra's cookies, stops at each redirect.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// follow GETs target and the redirects after it until one carries param.
	follow := func(target, param string) string {
		t.Helper()
		for range 10 {
			resp, err := browser.Get(target)
			if err != nil {
				t.Fatalf("GET %s: %v", target, err)
			}
			_ = resp.Body.Close()
			loc, err := resp.Location()
			if err != nil {
				t.Fatalf("GET %s = %s, no redirect", target, resp.Status)
			}
			if v := loc.Query().Get(param); v != "" {
				return v
			}
			if e := loc.Query().Get("error"); e != "" {
				t.Fatalf("GET %s: redirected with error %s: %s", target, e, loc.Query().Get("error_description"))
			}
			target = loc.String()
		}
		t.Fatalf("no redirect with %s", param)
		return ""
	}
	auth := fmt.Sprintf("%s?%s", strings.TrimSuffix(hydra.TokenURL(), "/token")+"/auth", url.Values{
		"client_id": {clientID}, "response_type": {"code"}, "scope": {"openid offline_access"},
		"redirect_uri": {offlineRedirect}, "state": {"state-of-the-test"}, "audience": {audience},
	}.Encode())
	login := follow(auth, "login_challenge")
	accepted := call(http.MethodPut, hydra.AdminURL()+"/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(login),
		map[string]any{"subject": subject})
	consent := follow(accepted["redirect_to"].(string), "consent_challenge")
	accepted = call(http.MethodPut, hydra.AdminURL()+"/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(consent),
		map[string]any{"grant_scope": []string{"openid", "offline_access"}, "grant_access_token_audience": []string{audience}})
	code := follow(accepted["redirect_to"].(string), "code")

	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {offlineRedirect}}
	req, err := http.NewRequest(http.MethodPost, hydra.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, secret)
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.RefreshToken == "" {
		t.Fatalf("POST %s (authorization_code) = %s, refresh token %v, %v", hydra.TokenURL(), resp.Status, tok.RefreshToken != "", err)
	}
	return tok.RefreshToken
}
