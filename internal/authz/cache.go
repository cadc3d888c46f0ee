package authz

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// decisionCache remembers the decisions of recent requests. A policy whose
// rules call no nondeterministic built-in (the time, random numbers, HTTP)
// is a pure function of its input and of data fixed at start, so a request
// asked again gets the decision it got. It keeps at most max entries and
// forgets them all when full: the working set of a server (its callers'
// lists and reads) fits, and a burst of one-off requests cannot grow it.
type decisionCache struct {
	mu  sync.Mutex
	max int
	m   map[fleet.AuthzRequest]error
}

// newDecisionCache returns a cache of at most size decisions, or nil (no
// cache) when size is 0.
func newDecisionCache(size int) *decisionCache {
	if size <= 0 {
		return nil
	}
	return &decisionCache{max: size, m: make(map[fleet.AuthzRequest]error, size)}
}

// get returns the decision remembered for req. Errors remembered are the
// policy's refusals: never an evaluation failure.
func (c *decisionCache) get(req fleet.AuthzRequest) (error, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err, ok := c.m[req]
	return err, ok
}

// put remembers a decision the policy took for req.
func (c *decisionCache) put(req fleet.AuthzRequest, err error) {
	if c == nil || (err != nil && fleet.ErrorCodeOf(err) == fleet.CodeInternal) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[req] = err
}

// nondeterministic returns the nondeterministic built-ins module calls, by
// name: a policy that calls one is evaluated at every request. A call is an
// expression's operator or a term nested in one (time.now_ns() > 0).
func nondeterministic(module *ast.Module) []string {
	var names []string
	note := func(name string) {
		if b, ok := ast.BuiltinMap[name]; ok && b.Nondeterministic {
			names = append(names, name)
		}
	}
	ast.WalkExprs(module, func(e *ast.Expr) bool {
		if e.IsCall() {
			note(e.Operator().String())
		}
		return false
	})
	ast.WalkTerms(module, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
			note(call[0].Value.String())
		}
		return false
	})
	return names
}
