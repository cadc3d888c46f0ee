package httpserve

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmanager/fleet-manager/internal/version"
)

// NewBuildInfo returns the <namespace>_build_info gauge: always 1, labelled
// with the version and commit the linker set and the Go release that built
// the binary, so that a dashboard or an alert can tell which build each
// replica runs (and a rollout's mix of two) without reading the logs.
func NewBuildInfo(namespace string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "Always 1; the labels say which build runs: version, commit and the Go release.",
		ConstLabels: prometheus.Labels{
			"version":   version.Version,
			"commit":    version.Commit,
			"goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}
