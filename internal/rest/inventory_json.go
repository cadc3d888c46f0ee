package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The answers that carry managed clusters (list, get, change feed) are
// written by appendJSON below rather than by encoding/json alone. A cluster's
// labels, claims, capacity, allocatable and conditions come from the database
// as JSON text and are copied into the answer as they are: decoding them into
// maps and encoding them again was most of a page's CPU, and encoding/json,
// given them as json.Marshaler output, would still validate and compact every
// byte (docs/performance.md). What PostgreSQL returns is
// valid JSON (jsonb written out with a space after `:` and `,`, json as it was
// stored) and is kept as it is. The rest of each answer is
// the generated type, encoded by encoding/json, without the fields appended
// after it. This is the answer's half of the inventory's fast read path
// (its contract is at the top of internal/postgres/find.go). The API tests
// validate every answer against the OpenAPI document; a field written as
// another of its type passes that, and is caught by
// TestAppendedAnswersAreWhatEncodingJSONWrites, which compares every field
// with what encoding/json writes of the generated type: a field added here
// is added there.

// jsonAppender writes its JSON encoding to a jsonBuilder.
type jsonAppender interface {
	appendJSON(j *jsonBuilder) error
}

// jsonBuilder is an answer being written: objects encoded by encoding/json
// and fields copied as they are.
type jsonBuilder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// object writes the JSON object of v without its closing brace, for fields
// to follow; v's type leaves those fields out.
func (j *jsonBuilder) object(v any) error {
	if err := j.enc.Encode(v); err != nil {
		return err
	}
	j.buf.Truncate(j.buf.Len() - len("}\n"))
	return nil
}

// field writes `"name":` and raw, after a comma unless the object has no
// field yet.
func (j *jsonBuilder) field(name string, raw []byte) {
	if j.buf.Bytes()[j.buf.Len()-1] != '{' {
		j.buf.WriteByte(',')
	}
	j.buf.WriteByte('"')
	j.buf.WriteString(name)
	j.buf.WriteString(`":`)
	j.buf.Write(raw)
}

// timeField writes `"name":` and t as encoding/json writes a time.Time, an
// RFC 3339 string with nanoseconds, without time.Time's Marshaler and the
// validation and compaction encoding/json gives any Marshaler's output, three
// times a cluster (docs/performance.md).
func (j *jsonBuilder) timeField(name string, t time.Time) {
	j.field(name, nil)
	j.buf.WriteByte('"')
	j.buf.Write(t.AppendFormat(j.buf.AvailableBuffer(), time.RFC3339Nano))
	j.buf.WriteByte('"')
}

// maxPooledBuilder is the largest builder kept for reuse; a larger answer's
// is left to the garbage collector.
const maxPooledBuilder = 4 << 20

// newJSONBuilder is the New of Server.builders.
func newJSONBuilder() any {
	j := &jsonBuilder{}
	j.enc = json.NewEncoder(&j.buf)
	return j
}

// writeAppendedJSON writes v as the JSON body of a response with status. The
// builder comes from the pool with the room its last answer needed.
func (s *Server) writeAppendedJSON(w http.ResponseWriter, status int, v jsonAppender) error {
	j := s.builders.Get().(*jsonBuilder)
	defer func() {
		if j.buf.Cap() <= maxPooledBuilder {
			j.buf.Reset()
			s.builders.Put(j)
		}
	}()
	if err := v.appendJSON(j); err != nil {
		return err
	}
	j.buf.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An error here means the client went away; there is no one left to tell.
	_, _ = w.Write(j.buf.Bytes())
	return nil
}

// managedClusterJSON is a public.ManagedCluster with its stored documents.
type managedClusterJSON struct {
	cluster     public.ManagedCluster // its documents' fields unset
	labels      fleet.StringMapJSON
	claims      fleet.StringMapJSON
	capacity    fleet.StringMapJSON
	allocatable fleet.StringMapJSON
	conditions  fleet.ConditionsJSON
}

// managedClusterHead is public.ManagedCluster without the documents and the
// times: each outer field, nil and omitted, takes the place of the generated
// field of the same JSON name (encoding/json's rule for embedded structs).
type managedClusterHead struct {
	public.ManagedCluster
	Labels      *struct{} `json:"labels,omitempty"`
	Claims      *struct{} `json:"claims,omitempty"`
	Capacity    *struct{} `json:"capacity,omitempty"`
	Allocatable *struct{} `json:"allocatable,omitempty"`
	Conditions  *struct{} `json:"conditions,omitempty"`
	LastSeenAt  *struct{} `json:"last_seen_at,omitempty"`
	CreatedAt   *struct{} `json:"created_at,omitempty"`
	UpdatedAt   *struct{} `json:"updated_at,omitempty"`
}

func (c managedClusterJSON) appendJSON(j *jsonBuilder) error {
	if err := j.object(managedClusterHead{ManagedCluster: c.cluster}); err != nil {
		return err
	}
	j.field("labels", c.labels.JSON())
	j.field("claims", c.claims.JSON())
	j.field("capacity", c.capacity.JSON())
	j.field("allocatable", c.allocatable.JSON())
	j.field("conditions", c.conditions.JSON())
	j.timeField("last_seen_at", c.cluster.LastSeenAt)
	j.timeField("created_at", c.cluster.CreatedAt)
	j.timeField("updated_at", c.cluster.UpdatedAt)
	j.buf.WriteByte('}')
	return nil
}

// managedClusterListJSON is a public.ManagedClusterList.
type managedClusterListJSON struct {
	list  public.ManagedClusterList // Items unset
	items []managedClusterJSON
}

func (l managedClusterListJSON) appendJSON(j *jsonBuilder) error {
	return appendList(j, struct {
		public.ManagedClusterList
		Items *struct{} `json:"items,omitempty"`
	}{ManagedClusterList: l.list}, l.items)
}

// managedClusterChangeJSON is a public.ManagedClusterChange.
type managedClusterChangeJSON struct {
	change  public.ManagedClusterChange // Cluster unset
	cluster managedClusterJSON
}

func (c managedClusterChangeJSON) appendJSON(j *jsonBuilder) error {
	if err := j.object(struct {
		public.ManagedClusterChange
		Cluster *struct{} `json:"cluster,omitempty"`
	}{ManagedClusterChange: c.change}); err != nil {
		return err
	}
	j.field("cluster", nil)
	if err := c.cluster.appendJSON(j); err != nil {
		return err
	}
	j.buf.WriteByte('}')
	return nil
}

// managedClusterChangeListJSON is a public.ManagedClusterChangeList.
type managedClusterChangeListJSON struct {
	list  public.ManagedClusterChangeList // Items unset
	items []managedClusterChangeJSON
}

func (l managedClusterChangeListJSON) appendJSON(j *jsonBuilder) error {
	return appendList(j, struct {
		public.ManagedClusterChangeList
		Items *struct{} `json:"items,omitempty"`
	}{ManagedClusterChangeList: l.list}, l.items)
}

// appendList writes a list: head, whose type leaves out `items`, then the
// JSON array of items.
func appendList[T jsonAppender](j *jsonBuilder, head any, items []T) error {
	if err := j.object(head); err != nil {
		return err
	}
	j.field("items", []byte{'['})
	for i, item := range items {
		if i > 0 {
			j.buf.WriteByte(',')
		}
		if err := item.appendJSON(j); err != nil {
			return err
		}
	}
	j.buf.WriteString("]}")
	return nil
}

func (s *Server) presentManagedCluster(c fleet.ManagedCluster) managedClusterJSON {
	return managedClusterJSON{
		cluster: public.ManagedCluster{
			Kind: public.ManagedClusterKindManagedCluster, Id: c.ID, Href: s.cfg.BasePath + "/managed_clusters/" + c.ID, Name: c.Name,
			Hub:       public.HubRef{Id: c.Hub.ID, Name: c.Hub.Name, Zone: c.Hub.Zone, Region: c.Hub.Region},
			ClusterId: strPtr(c.ClusterID), RegistrationId: strPtr(c.RegistrationID), KubernetesVersion: strPtr(c.KubernetesVersion),
			OpenshiftVersion: strPtr(c.OpenShiftVersion), Platform: strPtr(c.Platform), Product: strPtr(c.Product),
			Region: strPtr(c.Region), ConsoleUrl: strPtr(c.ConsoleURL), Joined: public.ManagedClusterJoined(c.Joined),
			Available: public.ManagedClusterAvailable(c.Available), Stale: c.Stale, LastSeenAt: c.LastSeenAt,
			CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		},
		labels: c.Labels, claims: c.Claims, capacity: c.Capacity, allocatable: c.Allocatable, conditions: c.Conditions,
	}
}
