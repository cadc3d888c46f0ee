package rest

import (
	"unicode/utf8"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
)

// checkBody refuses, reading the bytes of a request body once without
// decoding or recursing: a public or admin body whose objects and arrays
// nest deeper than fleet.MaxObjectDepth (the validator and the handlers
// recurse once per level, and what a user sends may reach a hub inside a
// desired set a few levels deeper still; the agents' bodies carry the hubs'
// own objects, which their API servers accepted); a body that is not UTF-8;
// and strings holding an escaped NUL (\u0000), which PostgreSQL refuses in
// text and jsonb.
func checkBody(op operation, body []byte) error {
	limit := fleet.MaxObjectDepth
	if op.spec.file == openapi.Private {
		limit = 0
	}
	deeper, nul := scanJSON(body, limit)
	switch {
	case deeper:
		return fleet.Errorf(fleet.CodeValidation, "the request body's objects and arrays may nest at most %d levels deep", fleet.MaxObjectDepth)
	case !utf8.Valid(body):
		return fleet.Errorf(fleet.CodeMalformedBody, "the request body must be UTF-8")
	case nul:
		return fleet.Errorf(fleet.CodeValidation, "the request body: strings %s", textRule)
	}
	return nil
}

// scanJSON walks the JSON text raw once, keeping one counter: deeper
// reports that it opens more than limit objects and arrays at once (limit 0:
// no bound; it stops there), nul that a string holds an escaped NUL.
// Brackets inside strings do not count; text that is not JSON is left to the
// decoder to refuse.
func scanJSON(raw []byte, limit int) (deeper, nul bool) {
	depth, inString, escaped := 0, false, false
	for i, c := range raw {
		switch {
		case escaped:
			escaped = false
			if c == 'u' && i+4 < len(raw) && string(raw[i+1:i+5]) == "0000" {
				nul = true
			}
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; limit > 0 && depth > limit {
				return true, nul
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false, nul
}
