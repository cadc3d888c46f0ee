package authz

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// liveRegistrationsField is the input field a policy reads the organisation's
// live registrations from.
const liveRegistrationsField = "live_registrations"

// orgUsageField is the input field a policy reads what an organisation holds
// of capacity pools from.
const orgUsageField = "org_usage"

// ReadsOrgUsage tells whether a decision may depend on the request's
// OrgUsage where the organisation's limits are 0 (none), so that the store
// sums an organisation's reserved units (and makes its bookings wait on each
// other for the sum to hold) only when the answer can change with it. The
// embedded policy reads the usage only against a limit above 0, which the
// store knows; a policy file may read it when its module refers to it.
func (a *Authorizer) ReadsOrgUsage() bool { return a.readsUsage }

// ReadsLiveRegistrations tells whether a decision may depend on the request's
// LiveRegistrations, so that the store counts an organisation's registrations
// (and makes its creates wait on each other for the count to hold) only when
// the answer can change with it. The embedded policy reads the count only for
// a quota (--registration-quota above 0); a policy file may read it when its
// module refers to it at all (readsField).
func (a *Authorizer) ReadsLiveRegistrations() bool { return a.readsLive }

// readsField tells whether module may read the input field, from its
// syntax tree: a reference to the field by name, the field's name as a
// string anywhere (object.get(input, "live_registrations", 0), a variable
// key bound to it), or a use of input that could reach any field (input as
// a whole, input[k] with a key not a literal, an import of input). A policy
// that never names the field and uses input only through literal fields
// cannot read it.
func readsField(module *ast.Module, field string) bool {
	reads := false
	ast.WalkTerms(module, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.String:
			reads = reads || string(v) == field
		case ast.Ref:
			reads = reads || refReadsField(v, field)
		}
		return reads
	})
	return reads
}

// refReadsField tells whether ref may read input.<field>: it is input
// itself, input.<field>, or input[x] with x not a literal string.
func refReadsField(ref ast.Ref, field string) bool {
	if !ref.HasPrefix(ast.InputRootRef) {
		return false
	}
	if len(ref) == 1 {
		return true
	}
	key, ok := ref[1].Value.(ast.String)
	return !ok || string(key) == field
}
