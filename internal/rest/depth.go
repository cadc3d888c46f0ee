package rest

import (
	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
)

// checkBodyDepth refuses a public or admin request body whose objects and
// arrays nest deeper than fleet.MaxObjectDepth, before the validator and the
// handlers decode it: both recurse once per level, and what a user sends
// may reach a hub inside a desired set a few levels deeper still. The scan
// keeps one counter, so no body can exhaust it. The agents' API is left
// alone: its bodies carry the hubs' own objects, which the hubs' API
// servers accepted.
func checkBodyDepth(op operation, body []byte) error {
	if op.spec.file == openapi.Private {
		return nil
	}
	if nestsDeeper(body, fleet.MaxObjectDepth) {
		return fleet.Errorf(fleet.CodeValidation, "the request body's objects and arrays may nest at most %d levels deep", fleet.MaxObjectDepth)
	}
	return nil
}

// nestsDeeper reports whether the JSON text raw opens more than limit
// objects and arrays at once. Brackets inside strings do not count; text
// that is not JSON is left to the decoder to refuse.
func nestsDeeper(raw []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}
