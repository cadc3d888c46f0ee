package rest

import (
	"bytes"
	"io"
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
)

// checkBodyDepth refuses a public or admin request body whose objects and
// arrays nest deeper than fleet.MaxObjectDepth, before the validator and the
// handlers decode it: both recurse once per level, and what a user sends
// may reach a hub inside a desired set a few levels deeper still. The scan
// keeps one counter, so no body can exhaust it. The body is read within the
// limit already set on it and put back for the readers after it; a read
// error is left for them to report. The agents' API is left alone: its
// bodies carry the hubs' own objects, which the hubs' API servers accepted.
func checkBodyDepth(op operation, r *http.Request) error {
	if op.spec.file == openapi.Private || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	raw, readErr := io.ReadAll(r.Body)
	var again io.Reader = bytes.NewReader(raw)
	if readErr != nil {
		again = io.MultiReader(again, errReader{readErr})
	}
	r.Body = readCloser{again, r.Body}
	if readErr == nil && nestsDeeper(raw, fleet.MaxObjectDepth) {
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

// readCloser reads a body put back and closes the original.
type readCloser struct {
	io.Reader
	io.Closer
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
