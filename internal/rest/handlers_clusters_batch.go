package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// batchCreateOperation is the operation id of the batch create. Its body is
// validated here, item by item, instead of by the validate middleware: a
// bad item fails only itself.
const batchCreateOperation = "createClusters"

// isBatchCreate reports whether op is the batch create, whose body has its
// own size limit and is validated by its handler.
func isBatchCreate(op operation) bool {
	return op.route.Operation.OperationID == batchCreateOperation
}

// handleClusterBatchCreate registers the items of a batch for the caller's
// organisation and answers one result per item, in order: 202 and the
// cluster, or the error POST /clusters would have answered for that item.
// Item i is registered under the Idempotency-Key "<key>/<i>".
func (s *Server) handleClusterBatchCreate(w http.ResponseWriter, r *http.Request) error {
	raw, err := s.batchItems(r)
	if err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	results := make([]public.ClusterBatchItemResult, len(raw))
	items := make([]fleet.RegistrationCreateItem, 0, len(raw))
	at := make([]int, 0, len(raw))
	for i, item := range raw {
		create, err := s.batchItem(item)
		if err != nil {
			results[i] = s.batchItemError(r, i, err)
			continue
		}
		it := fleet.RegistrationCreateItem{Create: create}
		if key != "" {
			it.IdempotencyKey = key + "/" + strconv.Itoa(i)
		}
		items, at = append(items, it), append(at, i)
	}
	if len(items) > 0 {
		created, err := s.services.Registrations.CreateRegistrations(r.Context(), caller(r), items)
		if err != nil {
			return err
		}
		for j, res := range created {
			i := at[j]
			if res.Err != nil {
				results[i] = s.batchItemError(r, i, res.Err)
				continue
			}
			cluster := s.presentCluster(res.Registration)
			results[i] = public.ClusterBatchItemResult{Index: i, Status: http.StatusAccepted, Cluster: &cluster}
		}
	}
	writeJSON(w, http.StatusOK, public.ClusterBatchResult{Kind: public.ClusterBatchResultKindClusterBatchResult, Items: results})
	return nil
}

// batchItems checks what concerns the batch itself, against the spec's
// ClusterBatchCreate with its items left to batchItem: a JSON object with
// 1 to RegistrationBatchMax items. It returns the items' JSON.
func (s *Server) batchItems(r *http.Request) ([]json.RawMessage, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, requestError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fleet.Errorf(fleet.CodeValidation, "the request body is required")
	}
	var value any
	if err := decodeJSONNumbers(body, &value); err != nil {
		return nil, err
	}
	schema := s.batchSchema()
	if err := schema.Value.VisitJSON(value, openapi3.VisitAsRequest()); err != nil {
		return nil, bodySchemaError(schema, err)
	}
	var batch struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &batch); err != nil {
		return nil, fleet.Errorf(fleet.CodeMalformedBody, "the request body could not be parsed: %s", describeJSONError(err))
	}
	if len(batch.Items) > s.cfg.RegistrationBatchMax {
		return nil, fleet.Errorf(fleet.CodeValidation, "items: must have at most %d items (--registration-batch-max)", s.cfg.RegistrationBatchMax)
	}
	return batch.Items, nil
}

// batchSchema is the spec's ClusterBatchCreate with any item allowed: each
// is checked on its own against ClusterCreate.
func (s *Server) batchSchema() *openapi3.SchemaRef {
	batch := *s.public.doc.Components.Schemas["ClusterBatchCreate"].Value
	items := *batch.Properties["items"].Value
	items.Items = &openapi3.SchemaRef{Value: &openapi3.Schema{}}
	batch.Properties = openapi3.Schemas{"items": {Value: &items}}
	return &openapi3.SchemaRef{Value: &batch}
}

// batchItem checks one item as POST /clusters checks its body, with the same
// reasons, and returns what it asks for.
func (s *Server) batchItem(raw json.RawMessage) (fleet.RegistrationCreate, error) {
	var value any
	if err := decodeJSONNumbers(raw, &value); err != nil {
		return fleet.RegistrationCreate{}, err
	}
	schema := s.public.doc.Components.Schemas["ClusterCreate"]
	if err := schema.Value.VisitJSON(value, openapi3.VisitAsRequest()); err != nil {
		return fleet.RegistrationCreate{}, bodySchemaError(schema, err)
	}
	var body public.ClusterCreate
	if err := decodeJSON(bytes.NewReader(raw), &body); err != nil {
		return fleet.RegistrationCreate{}, err
	}
	return registrationCreate(body), nil
}

// decodeJSONNumbers decodes JSON for the schema validator, numbers kept as
// json.Number as the request validator keeps them.
func decodeJSONNumbers(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fleet.Errorf(fleet.CodeMalformedBody, "the request body could not be parsed: %s", describeJSONError(err))
	}
	return nil
}

// bodySchemaError renders a body's schema failure as requestError does: the
// field and the rule, never the value.
func bodySchemaError(root *openapi3.SchemaRef, err error) error {
	var schemaErr *openapi3.SchemaError
	if !errors.As(err, &schemaErr) {
		return fleet.Errorf(fleet.CodeValidation, "the request body does not match the API specification")
	}
	at := schemaPath(root, schemaErr.JSONPointer())
	if at == "" {
		at = "the request body"
	}
	return fleet.Errorf(fleet.CodeValidation, "%s: %s", at, schemaRule(schemaErr))
}

// batchItemError is the result of item i refused with err: the status and
// error body writeError would have answered for it alone.
func (s *Server) batchItemError(r *http.Request, i int, err error) public.ClusterBatchItemResult {
	entry, ok := fleet.LookupErrorCode(fleet.ErrorCodeOf(err))
	if !ok {
		entry, _ = fleet.LookupErrorCode(fleet.CodeInternal)
	}
	body := s.errorBody(entry, fleet.ErrorMessageOf(err), OperationID(r.Context()))
	if details := fleet.ErrorDetailsOf(err); len(details) > 0 {
		body.Details = &details
	}
	return public.ClusterBatchItemResult{Index: i, Status: statusOf(entry.Kind), Error: &body}
}

// registrationCreate is what a createCluster body asks to register.
func registrationCreate(body public.ClusterCreate) fleet.RegistrationCreate {
	create := fleet.RegistrationCreate{
		Name: body.Name, DisplayName: deref(body.DisplayName), Zone: deref(body.Zone), Region: deref(body.Region),
		Product: fleet.Product(body.Product),
	}
	if body.Labels != nil {
		create.Labels = *body.Labels
	}
	if c := body.Credentials; c != nil {
		create.Credentials = &fleet.ImportCredentials{Kubeconfig: deref(c.Kubeconfig), APIURL: deref(c.ApiUrl), Token: deref(c.Token)}
	}
	return create
}
