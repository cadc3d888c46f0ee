package rest

import "github.com/fleetmanager/fleet-manager/pkg/api/public"

// A page of clusters (registrations) is written as the inventory's answers
// are (inventory_json.go): encoding/json writes each cluster without its
// times and conditions, and appendJSON writes those, each time without
// time.Time's Marshaler and the validation encoding/json gives its output,
// seven times a cluster with five conditions. TestClusterAnswersAreWhatEncodingJSONWrites
// compares every field with what encoding/json writes of public.Cluster.

// clusterJSON is a public.Cluster written by appendJSON.
type clusterJSON public.Cluster

// clusterHead is public.Cluster without the fields clusterJSON appends:
// each outer field, nil and omitted, takes the place of the generated field
// of the same JSON name (encoding/json's rule for embedded structs).
type clusterHead struct {
	public.Cluster
	Conditions *struct{} `json:"conditions,omitempty"`
	CreatedAt  *struct{} `json:"created_at,omitempty"`
	UpdatedAt  *struct{} `json:"updated_at,omitempty"`
}

// conditionHead is public.Condition without its time.
type conditionHead struct {
	public.Condition
	LastTransitionTime *struct{} `json:"last_transition_time,omitempty"`
}

func (c clusterJSON) appendJSON(j *jsonBuilder) error {
	if err := j.object(clusterHead{Cluster: public.Cluster(c)}); err != nil {
		return err
	}
	j.field("conditions", []byte{'['})
	for i, cond := range c.Conditions {
		if i > 0 {
			j.buf.WriteByte(',')
		}
		if err := j.object(conditionHead{Condition: cond}); err != nil {
			return err
		}
		j.timeField("last_transition_time", cond.LastTransitionTime)
		j.buf.WriteByte('}')
	}
	j.buf.WriteByte(']')
	j.timeField("created_at", c.CreatedAt)
	j.timeField("updated_at", c.UpdatedAt)
	j.buf.WriteByte('}')
	return nil
}

// clusterListJSON is a public.ClusterList.
type clusterListJSON struct {
	list  public.ClusterList // Items unset
	items []clusterJSON
}

func (l clusterListJSON) appendJSON(j *jsonBuilder) error {
	return appendList(j, struct {
		public.ClusterList
		Items *struct{} `json:"items,omitempty"`
	}{ClusterList: l.list}, l.items)
}
