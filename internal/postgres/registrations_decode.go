package postgres

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// A page of registrations decodes every row's labels and conditions, read
// from jsonb as text: through encoding/json, that was the largest share of
// the fleet manager's CPU for the page (its validation pass, reflection and
// a time.Time Unmarshaler per condition). decodeLabels and decodeConditions
// read the flat shapes the API writes there (an object of strings; an array
// of objects of strings and one integer) in one pass without reflection.
// Anything else (a null, a nested value, a key they do not know) is handed
// to encoding/json whole, so the result is always what json.Unmarshal
// gives: TestRegistrationDocumentsDecodeAsEncodingJSON compares the two.

// errNotFlat is a document the fast decoders leave to encoding/json.
var errNotFlat = errors.New("not a flat document")

// decodeLabels decodes a JSON object of strings.
func decodeLabels(doc []byte) (map[string]string, error) {
	d := flatDecoder{doc: doc}
	labels, err := d.labels()
	if err == nil {
		return labels, nil
	}
	labels = nil
	return labels, json.Unmarshal(doc, &labels)
}

// decodeConditions decodes a JSON array of conditions.
func decodeConditions(doc []byte) (fleet.Conditions, error) {
	d := flatDecoder{doc: doc}
	conds, err := d.conditions()
	if err == nil {
		return conds, nil
	}
	conds = nil
	return conds, json.Unmarshal(doc, &conds)
}

// flatDecoder reads a document of one level of objects, or an array of
// them, with string and integer values.
type flatDecoder struct {
	doc []byte
	at  int
}

func (d *flatDecoder) labels() (map[string]string, error) {
	labels := map[string]string{}
	err := d.object(func(key string) error {
		if _, dup := labels[key]; dup {
			return errNotFlat
		}
		v, err := d.str()
		labels[key] = v
		return err
	})
	return labels, d.end(err)
}

func (d *flatDecoder) conditions() (fleet.Conditions, error) {
	if !d.next('[') {
		return nil, errNotFlat
	}
	conds := fleet.Conditions{}
	for first := true; !d.next(']'); first = false {
		if !first && !d.next(',') {
			return nil, errNotFlat
		}
		var c fleet.Condition
		seen := map[string]bool{} // escapes to no heap: a few keys
		if err := d.object(func(key string) error {
			if seen[key] {
				return errNotFlat
			}
			seen[key] = true
			return d.conditionField(&c, key)
		}); err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, d.end(nil)
}

// conditionField reads the value of c's field key.
func (d *flatDecoder) conditionField(c *fleet.Condition, key string) error {
	var s string
	var err error
	switch key {
	case "type", "status", "reason", "message", "last_transition_time":
		s, err = d.str()
	case "observed_generation":
		c.ObservedGeneration, err = d.integer()
		return err
	default:
		return errNotFlat
	}
	switch key {
	case "type":
		c.Type = s
	case "status":
		c.Status = fleet.ConditionStatus(s)
	case "reason":
		c.Reason = s
	case "message":
		c.Message = s
	case "last_transition_time":
		// As time.Time's UnmarshalJSON parses it.
		err = c.LastTransitionTime.UnmarshalText([]byte(s))
	}
	return err
}

// object reads an object, calling field for each key with the decoder at
// its value. The callers leave a key seen twice to encoding/json.
func (d *flatDecoder) object(field func(key string) error) error {
	if !d.next('{') {
		return errNotFlat
	}
	for first := true; !d.next('}'); first = false {
		if !first && !d.next(',') {
			return errNotFlat
		}
		key, err := d.str()
		if err != nil || !d.next(':') {
			return errNotFlat
		}
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

// skip skips white space.
func (d *flatDecoder) skip() {
	for d.at < len(d.doc) && (d.doc[d.at] == ' ' || d.doc[d.at] == '\n' || d.doc[d.at] == '\t' || d.doc[d.at] == '\r') {
		d.at++
	}
}

// next skips white space and reports whether c comes next, reading it if so.
func (d *flatDecoder) next(c byte) bool {
	d.skip()
	if d.at < len(d.doc) && d.doc[d.at] == c {
		d.at++
		return true
	}
	return false
}

// str reads a string without escapes or control characters, of valid
// UTF-8 (encoding/json replaces an invalid byte; PostgreSQL writes none).
func (d *flatDecoder) str() (string, error) {
	if !d.next('"') {
		return "", errNotFlat
	}
	start, ascii := d.at, true
	for ; d.at < len(d.doc); d.at++ {
		switch c := d.doc[d.at]; {
		case c == '"':
			d.at++
			s := d.doc[start : d.at-1]
			if !ascii && !utf8.Valid(s) {
				return "", errNotFlat
			}
			return string(s), nil
		case c == '\\' || c < 0x20:
			return "", errNotFlat
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", errNotFlat
}

// integer reads a JSON integer.
func (d *flatDecoder) integer() (int64, error) {
	d.skip()
	start := d.at
	if d.at < len(d.doc) && d.doc[d.at] == '-' {
		d.at++
	}
	for d.at < len(d.doc) && d.doc[d.at] >= '0' && d.doc[d.at] <= '9' {
		d.at++
	}
	digits := string(d.doc[start:d.at])
	if len(digits) > 1 && (digits[0] == '0' || digits[:2] == "-0") {
		return 0, errNotFlat // a leading zero: not JSON
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, errNotFlat
	}
	return n, nil
}

// end checks that nothing but white space follows.
func (d *flatDecoder) end(err error) error {
	if err != nil {
		return err
	}
	d.skip()
	if d.at != len(d.doc) {
		return errNotFlat
	}
	return nil
}
