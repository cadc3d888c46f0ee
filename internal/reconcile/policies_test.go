package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/logtest"
	"github.com/fleetmanager/fleet-manager/internal/reconcile"
)

// failingPolicies is a policy store whose every pass fails.
type failingPolicies struct{}

func (failingPolicies) ResolvePolicies(context.Context) (int, error) {
	return 0, fmt.Errorf("ResolvePolicies: %w", &fleet.Error{Code: fleet.CodeUnavailable,
		Message: "the database is unavailable; retry later", Err: errors.New("dial tcp 127.0.0.1:5432: connection refused")})
}

// TestPolicyResolverLogsFailure checks that a pass that could not place the
// policies is logged with its error and the database's cause behind it, and
// counted as an error.
func TestPolicyResolverLogsFailure(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	reg := prometheus.NewRegistry()
	metrics, err := reconcile.NewMetrics("test", reg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var out logtest.Buffer
	r := reconcile.NewPolicyResolver(reconcile.DefaultConfig(), failingPolicies{}, fleet.SystemClock{}, slog.New(slog.NewTextHandler(&out, nil)), metrics)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	g.Eventually(out.String).WithTimeout(10 * time.Second).WithPolling(10 * time.Millisecond).Should(gomega.And(
		gomega.ContainSubstring(`msg="placing policies on hubs"`),
		gomega.ContainSubstring(`error="ResolvePolicies: the database is unavailable; retry later"`),
		gomega.ContainSubstring(`cause="dial tcp 127.0.0.1:5432: connection refused"`)))
	g.Eventually(func() (bool, error) {
		families, err := reg.Gather()
		for _, f := range families {
			if f.GetName() != "test_reconcile_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += l.GetName() + "=" + l.GetValue() + ","
				}
				if strings.Contains(labels, "outcome=error,") && strings.Contains(labels, "policy_resolver") {
					return m.GetHistogram().GetSampleCount() > 0, err
				}
			}
		}
		return false, err
	}).WithTimeout(10 * time.Second).Should(gomega.BeTrue())
}
