package postgres

import (
	"maps"
	"slices"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// ListFieldNames are the fields one list accepts: in `search` (a labels
// field as "labels.<key>") and in `orderBy`, each sorted.
type ListFieldNames struct {
	Search, OrderBy []string
}

// ListFields names, for every list the API serves, the fields its search and
// orderBy accept, read from the tables the queries use. The specs list the
// same fields in each list operation's parameters; a test in internal/rest
// holds them equal. The synced resources' list accepts these and, per kind,
// the registry's own fields.
func ListFields() map[string]ListFieldNames {
	specs := map[string]listSpec{
		"clusters": registrationList, "managed_clusters": managedClusterList, "policies": policyList,
		"policy_compliance": complianceList, "blueprints": blueprintList, "blueprint_versions": blueprintVersionList,
		"capacity_pools": poolList, "capacity_pool_clusters": poolClusterList, "reservations": reservationList,
		"capacity_pool_events": poolEventList, "dns_records": dnsRecordList, "hubs": hubList,
		"resources": resourceListSpec(fleet.ResourceKind{}), "dns_zones": dnsZoneList, "dns_services": dnsServiceList,
	}
	out := make(map[string]ListFieldNames, len(specs))
	for name, spec := range specs {
		var search []string
		for field, f := range spec.search {
			if f.Type == FieldLabels {
				field += ".<key>"
			}
			search = append(search, field)
		}
		slices.Sort(search)
		out[name] = ListFieldNames{Search: search, OrderBy: slices.Sorted(maps.Keys(spec.orderBy))}
	}
	return out
}
