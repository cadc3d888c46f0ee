package postgres

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// storedPolicyBody is a policy's body as read. A body nested deeper than
// fleet.MaxDeliveredDepth, or that does not decode (a row written before the
// API bounded bodies), reads as nil instead of failing the read, so that its
// owner still lists, reads and deletes the policy, and reads why no hub has
// it; toPolicy shows such a body as a stub naming the policy.
type storedPolicyBody struct{ body map[string]any }

// Scan implements sql.Scanner; it never fails on the body's content.
func (b *storedPolicyBody) Scan(v any) error {
	var raw []byte
	switch v := v.(type) {
	case nil:
		b.body = nil
		return nil
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		return fmt.Errorf("policy body: unexpected %T", v)
	}
	var m map[string]any
	if fleet.JSONDepth(raw) > fleet.MaxDeliveredDepth || json.Unmarshal(raw, &m) != nil {
		m = nil
	}
	b.body = m
	return nil
}

// Value implements driver.Valuer, for GORM; bodies are written as JSON text.
func (b storedPolicyBody) Value() (driver.Value, error) {
	if b.body == nil {
		return nil, nil
	}
	return jsonText(b.body), nil
}

// policyBodyOrStub returns body, or for a body that could not be read, one
// that only names the policy.
func policyBodyOrStub(body storedPolicyBody, name string) map[string]any {
	if body.body != nil {
		return body.body
	}
	return map[string]any{"apiVersion": fleet.PolicyAPIVersion, "kind": fleet.PolicyKind, "metadata": map[string]any{"name": name}}
}

// GormDataType tells GORM the column's type.
func (storedPolicyBody) GormDataType() string { return "jsonb" }
