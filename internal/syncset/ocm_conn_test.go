package syncset_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/syncset"
	"github.com/fleetmanager/fleet-manager/internal/syncset/ocmtest"
)

func TestOCMCredentialKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		grant string
		creds func(srv *ocmtest.Server) map[string]string
	}{
		{"client credentials", "client_credentials", func(*ocmtest.Server) map[string]string {
			return map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: ocmSecret}
		}},
		{"offline token", "refresh_token", func(srv *ocmtest.Server) map[string]string {
			return map[string]string{fleet.CredentialOCMOfflineToken: srv.IssueOfflineToken()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			e.src.setCredentials(tc.creds(e.srv))
			e.deliver(t)
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken(tc.grant, 200), e.get(404), e.post(201), e.delLegacy(404)}))

			// The fake revokes the access token: the same Deliver gets a new one.
			e.srv.RevokeAccessTokens()
			e.srv.ResetCalls()
			e.reg.Labels = map[string]string{"env": "staging"}
			e.deliver(t)
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{
				e.get(401), ocmToken(tc.grant, 200), e.get(200), e.patch(200),
			}))
		})
	}
}

func TestOCMBadCredentialsFailDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		creds  map[string]string
		grant  string
		status int
		reason string
	}{
		{"wrong client secret", map[string]string{fleet.CredentialOCMClientID: ocmClient, fleet.CredentialOCMClientSecret: "wrong"},
			"client_credentials", 401, "invalid_client"},
		{"unknown offline token", map[string]string{fleet.CredentialOCMOfflineToken: "opaque-unknown-token"},
			"refresh_token", 400, "invalid_grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			e.src.setCredentials(tc.creds)
			report, err := e.d.Deliver(context.Background(), e.hub, e.reg)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "credentials SSO refuses need fixing, not retrying")
			g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
			g.Expect(report.Message).To(gomega.And(gomega.ContainSubstring(tc.reason), gomega.ContainSubstring("token")))
			g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken(tc.grant, tc.status)}), "no API call without a token")
		})
	}
}

func TestOCMCredentialsChangeBuildsNewConnection(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	e.deliver(t)
	g.Expect(ocmCount(e.srv.Calls(), "POST "+ocmtest.TokenPath)).To(gomega.Equal(1), "the connection and its token are reused")

	e.src.setCredentials(map[string]string{fleet.CredentialOCMOfflineToken: e.srv.IssueOfflineToken()})
	e.srv.ResetCalls()
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken("refresh_token", 200), e.get(200)}))

	e.srv.AddClient("rotated-client", "rotated-secret")
	e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: "rotated-client", fleet.CredentialOCMClientSecret: "rotated-secret"})
	e.srv.ResetCalls()
	e.deliver(t)
	g.Expect(e.srv.Calls()).To(gomega.Equal([]ocmtest.Call{ocmToken("client_credentials", 200), e.get(200)}))
}

func TestOCMHubTokenURLOverridesDefault(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, func(c *syncset.OCMConfig) { c.TokenURL = "http://127.0.0.1:1/token" })
	e.hub.OCM.TokenURL = e.srv.TokenURL()
	e.deliver(t)
	g.Expect(e.srv.Calls()[0]).To(gomega.Equal(ocmToken("client_credentials", 200)))
}

func TestOCMHubWithoutTargetOrCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(e *ocmEnv)
		want  string
	}{
		{"no OCM target", func(e *ocmEnv) { e.hub.OCM = nil }, "no OCM target"},
		{"no credentials", func(e *ocmEnv) { e.src.setCredentials(nil) }, fleet.CredentialOCMOfflineToken},
		{"client id without secret", func(e *ocmEnv) {
			e.src.setCredentials(map[string]string{fleet.CredentialOCMClientID: ocmClient})
		}, fleet.CredentialOCMClientSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := gomega.NewWithT(t)
			e := newOCMEnv(t, nil)
			tc.setup(e)
			for _, step := range []func(context.Context, fleet.Hub, fleet.Registration) (fleet.DeliveryReport, error){e.d.Deliver, e.d.Withdraw} {
				report, err := step(context.Background(), e.hub, e.reg)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(report.Reason).To(gomega.Equal(fleet.ReasonDeliveryFailed))
				g.Expect(report.Message).To(gomega.ContainSubstring(tc.want))
			}
			g.Expect(e.srv.Calls()).To(gomega.BeEmpty())
		})
	}
}

func TestOCMConfig(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	def := syncset.DefaultOCMConfig()
	g.Expect(def.TokenURL).To(gomega.Equal("https://sso.redhat.com/auth/realms/redhat-external/protocol/openid-connect/token"))
	g.Expect(def.Validate()).To(gomega.Succeed())

	c := syncset.DefaultOCMConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	g.Expect(fs.Parse([]string{"--ocm-token-url=http://sso.example.com/token", "--ocm-timeout=0s",
		"--ocm-retry-limit=9", "--ocm-retry-interval=0s"})).To(gomega.Succeed())
	err := c.Validate()
	g.Expect(err).To(gomega.HaveOccurred())
	for _, flag := range []string{"--ocm-token-url", "--ocm-timeout", "--ocm-retry-limit", "--ocm-retry-interval"} {
		g.Expect(err.Error()).To(gomega.ContainSubstring(flag))
	}

	g.Expect(fs.Parse([]string{"--ocm-token-url=http://127.0.0.1:8080/token", "--ocm-timeout=10s",
		"--ocm-retry-limit=2", "--ocm-retry-interval=500ms"})).To(gomega.Succeed())
	g.Expect(c).To(gomega.Equal(syncset.OCMConfig{TokenURL: "http://127.0.0.1:8080/token", Timeout: 10 * time.Second,
		RetryLimit: 2, RetryInterval: 500 * time.Millisecond}))
	g.Expect(c.Validate()).To(gomega.Succeed())
}

func TestOCMClosedDeliveryFails(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	e := newOCMEnv(t, nil)
	e.deliver(t)
	g.Expect(e.d.Close()).To(gomega.Succeed())
	_, err := e.d.Deliver(context.Background(), e.hub, e.reg)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("closed")))
}
