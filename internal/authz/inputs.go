package authz

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// liveRegistrationsField is the input field a policy reads the organisation's
// live registrations from.
const liveRegistrationsField = "live_registrations"

// ReadsLiveRegistrations tells whether a decision may depend on the request's
// LiveRegistrations, so that the store counts an organisation's registrations
// (and makes its creates wait on each other for the count to hold) only when
// the answer can change with it. The embedded policy reads the count only for
// a quota (--registration-quota above 0); a policy file may read it when its
// module refers to it at all (readsLiveRegistrations).
func (a *Authorizer) ReadsLiveRegistrations() bool { return a.readsLive }

// readsLiveRegistrations tells whether module may read
// input.live_registrations, from its syntax tree: a reference to the field
// by name, the string "live_registrations" anywhere (object.get(input,
// "live_registrations", 0), a variable key bound to it), or a use of input
// that could reach any field (input as a whole, input[k] with a key not a
// literal, an import of input). A policy that never names the field and
// uses input only through literal fields cannot read it.
func readsLiveRegistrations(module *ast.Module) bool {
	reads := false
	ast.WalkTerms(module, func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.String:
			reads = reads || string(v) == liveRegistrationsField
		case ast.Ref:
			reads = reads || refReadsLiveRegistrations(v)
		}
		return reads
	})
	return reads
}

// refReadsLiveRegistrations tells whether ref may read
// input.live_registrations: it is input itself, input.live_registrations, or
// input[x] with x not a literal string.
func refReadsLiveRegistrations(ref ast.Ref) bool {
	if !ref.HasPrefix(ast.InputRootRef) {
		return false
	}
	if len(ref) == 1 {
		return true
	}
	key, ok := ref[1].Value.(ast.String)
	return !ok || string(key) == liveRegistrationsField
}
