// Package templates holds the OpenShift templates that deploy Fleet Manager
// (service-template.yml) and a development PostgreSQL for it (db-template.yml).
// Its tests check that the templates agree with the binary's flags, ports and
// probes, and with each other on the database secret.
package templates
