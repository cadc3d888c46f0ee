package fleet

import (
	"slices"
	"sort"
)

// Zones is the data-sovereignty scope of a deployment: the zones it serves,
// and which deployment serves each of the others. One deployment with its
// own database serves each zone (or set of zones); rows of a zone never
// leave that deployment's database.
type Zones struct {
	// Served lists the zones this deployment serves; empty serves every zone.
	Served []string
	// Deployments maps a zone to the API URL of the deployment that serves
	// it (its base URL, e.g. https://fleet.us.example.com/api/fleet_manager/v1).
	Deployments map[string]string
}

// Detail keys of a CodeZoneNotServed error.
const (
	DetailZone          = "zone"
	DetailDeploymentURL = "deployment_url"
)

// ServesAll reports whether no zones are configured: every zone is served.
func (z Zones) ServesAll() bool { return len(z.Served) == 0 }

// Serves reports whether this deployment serves zone.
func (z Zones) Serves(zone string) bool {
	return z.ServesAll() || slices.Contains(z.Served, zone)
}

// Redirect returns the API URL of the deployment that serves zone, when
// zone is not served here and the map names one.
func (z Zones) Redirect(zone string) (string, bool) {
	if z.Serves(zone) {
		return "", false
	}
	url, ok := z.Deployments[zone]
	return url, ok && url != ""
}

// Check refuses a kind of object (a "hub", a "cluster", a "policy") in a
// zone this deployment does not serve. The message names the deployment
// that serves the zone, or says that none is known; the details carry the
// zone and, when known, the deployment's URL. Errors: CodeZoneNotServed.
func (z Zones) Check(kind, zone string) error {
	if z.Serves(zone) {
		return nil
	}
	served := slices.Clone(z.Served)
	sort.Strings(served)
	url, ok := z.Redirect(zone)
	if !ok {
		e := Errorf(CodeZoneNotServed, "this deployment does not serve zone %s (it serves %v) and knows no deployment that does; a %s in zone %s cannot be created here", zone, served, kind, zone)
		e.Details = map[string]string{DetailZone: zone}
		return e
	}
	e := Errorf(CodeZoneNotServed, "this deployment does not serve zone %s (it serves %v); create the %s at the deployment serving zone %s: %s", zone, served, kind, zone, url)
	e.Details = map[string]string{DetailZone: zone, DetailDeploymentURL: url}
	return e
}

// ValidZoneName reports whether zone is a valid zone name: a DNS label, as
// a hub's and a registration's zone must be.
func ValidZoneName(zone string) bool { return regionOrZone.MatchString(zone) }
