// Package templates holds the OpenShift templates that deploy Fleet Manager
// (service-template.yml), a development PostgreSQL for it (db-template.yml),
// its ServiceMonitor and alerts (monitoring-template.yml), and its Grafana
// dashboard (grafana-dashboard.json).
// Its tests check that the templates agree with the binary's flags, ports and
// probes, and with each other on the database secret; that the alerts pass
// promtool's unit tests; and that the dashboard and the alerts read only
// metrics the service exports.
package templates
