package main

import (
	"strings"
	"testing"
)

// TestServeDNSOwnerIDDefaultsToTheServiceName: without --dns-owner-id the
// deployment's DNS ownership records name it by --service-name; the flag
// wins; an owner id the ownership record's text cannot hold is refused,
// naming the flag.
func TestServeDNSOwnerIDDefaultsToTheServiceName(t *testing.T) {
	t.Parallel()
	opts := defaultServeOptions()
	opts.HTTP.ServiceName = "acme-fleet"
	opts.defaultDNSOwner()
	if opts.DNS.OwnerID != "acme-fleet" {
		t.Errorf("owner id = %q, want the service name acme-fleet", opts.DNS.OwnerID)
	}
	opts = defaultServeOptions()
	opts.DNS.OwnerID = "acme-fleet-eu"
	opts.defaultDNSOwner()
	if opts.DNS.OwnerID != "acme-fleet-eu" {
		t.Errorf("owner id = %q, want --dns-owner-id's acme-fleet-eu", opts.DNS.OwnerID)
	}
	_, stderr, err := execute(t, nil, "serve", "--dns-owner-id=acme,owner=x")
	if err == nil || !strings.Contains(err.Error(), "--dns-owner-id") {
		t.Fatalf("serve --dns-owner-id=acme,owner=x = %v, want an error naming --dns-owner-id; stderr: %s", err, stderr)
	}
	if strings.Contains(err.Error(), "acme,owner=x") {
		t.Errorf("serve error = %q: it echoes the value", err)
	}
}
