package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// fuzzOperation is one operation of the specs as the fuzz target calls it.
type fuzzOperation struct {
	file, method, path string
}

// fuzzOperations lists every operation of every spec, in a stable order, so
// that a corpus entry's operation index keeps naming the same operation.
func fuzzOperations(f *testing.F) ([]fuzzOperation, string) {
	f.Helper()
	var ops []fuzzOperation
	var specText strings.Builder
	for _, file := range openapi.All() {
		data, err := fs.ReadFile(openapi.Specs, file)
		if err != nil {
			f.Fatalf("ReadFile(%s): %v", file, err)
		}
		specText.Write(data)
		doc, err := openapi3.NewLoader().LoadFromData(data)
		if err != nil {
			f.Fatalf("LoadFromData(%s): %v", file, err)
		}
		for _, path := range doc.Paths.InMatchingOrder() {
			for method := range doc.Paths.Value(path).Operations() {
				ops = append(ops, fuzzOperation{file: file, method: method, path: path})
			}
		}
	}
	slices.SortFunc(ops, func(a, b fuzzOperation) int {
		return strings.Compare(a.file+" "+a.path+" "+a.method, b.file+" "+b.path+" "+b.method)
	})
	return ops, specText.String()
}

// FuzzAPIOperation sends every operation of the three specs, through the
// real router and a real database, a fuzzed query string, path parameter and
// body, with a token the operation takes. Whatever it sends, the answer is
// never a 5xx (a panic is recovered as one), and a refusal never repeats a
// value sent. `make fuzz` runs it for a bounded time; `go test` runs the seeds.
func FuzzAPIOperation(f *testing.F) {
	ops, specText := fuzzOperations(f)
	bodies := []string{
		`{"name":"fz","product":"OCP","zone":"eu","labels":{"env":"prod"},"credentials":{"kubeconfig":"KUBECONFIGSECRET"}}`,
		`{"display_name":"x","labels":{"a":"b"}}`,
		`{"name":"hub-fz","zone":"eu","region":"eu-1","delivery_mode":"agent","capacity":1,"agent_identity":"AGENTSECRET"}`,
		`{"agent_version":"1","agent_start_generation":1,"applied_revision":0}`,
		`{"full_sync":true,"clusters":[{"name":"mc","labels":{"k":"v"}}]}`,
		`{"name":"p","zone":"eu","policy":{"spec":{"remediationAction":"inform","policy-templates":[]}},"placement":{"label_selector":{}}}`,
		`{"items":[{"registration_id":"x","conditions":[]}]}`,
		`{"name":"fz.example.com","provider":"rfc2136","rfc2136":{"server":"ns.fz.example.com:53","tsig_key_name":"fz",` +
			`"tsig_algorithm":"hmac-sha256"},"credentials":{"tsig_secret":"VFNJR1NFQ1JFVC1WQUxVRS0wMTIzNDU2Nzg5"}}`,
		`{"name":"fzsvc","zone_id":"ZONEIDSECRET","writer_organizations":["org-fuzz"],"min_ttl":60}`,
		`{"instance":"fz","type":"A","ttl":60,"targets":["198.51.100.7"]}`,
		`{"instance":"FZ.SECRET","cluster_id":"CLUSTERSECRET"}`,
		`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		`{"name":"fz"} trailing`, `{"name":"a\u0000b"}`, "{\"name\":\"\xff\"}", ``, `null`, `[]`, `"s"`,
	}
	queries := []string{"", "page=9223372036854775807", "size=0&page=-1", "search=name%20%3D%20%27SEARCHSECRET%27%20and",
		"orderBy=ORDERSECRET", "wait=1ms", "after=-5", "cursor=CURSORSECRET", "kind=KINDSECRET", "search=%00", "page=%ff"}
	for i := range ops {
		for j, body := range bodies {
			if j%3 == i%3 || body == "" {
				f.Add(uint16(i), queries[(i+j)%len(queries)], "", []byte(body))
			}
		}
		f.Add(uint16(i), "", "PATHSECRET-value", []byte(bodies[0]))
	}

	fl := flavours()[0]
	fl.http.AgentMaxWait, fl.http.AgentDefaultWait, fl.http.FeedMaxWait = 50*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	e := newStackEnv(f, fl)
	userTok, adminTok := e.userToken(f, "org-fuzz", "fuzzer"), e.adminToken(f)
	hub := e.createAgentHub(f, "fuzz-hub", "eu", 5)
	agentTok := e.agentToken(f, deref(hub.AgentIdentity))
	cluster := e.createCluster(f, userTok, public.ClusterCreate{Name: "fuzz", Zone: ptr("eu"), Product: public.OCP})
	dnsZone := e.createDNSZone(f, rfc2136Zone("fuzz.example.com"))
	dnsService := e.createDNSService(f, admin.DNSServiceCreate{Name: "fuzz", ZoneId: dnsZone.Id, WriterOrganizations: &[]string{"org-fuzz"}})
	record, err := e.client.CreateDNSRecordWithResponse(context.Background(), dnsService.Name,
		public.DNSRecordCreate{Instance: "fuzz", Targets: &[]string{"ingress.apps.fuzz.example.net"}}, bearer(userTok))
	if err != nil || record.JSON201 == nil {
		f.Fatalf("CreateDNSRecord(fuzz) = %s; want 201", outcome(record, err))
	}
	tokens := map[string]string{openapi.Public: userTok, openapi.Admin: adminTok, openapi.Private: agentTok}
	pathValues := map[string]string{"{id}": cluster.Id, "{hub_id}": hub.Id, "{service_name}": dnsService.Name, "{record_id}": record.JSON201.Id}

	f.Fuzz(func(t *testing.T, opIndex uint16, rawQuery, pathArg string, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		path := op.path
		for name, value := range pathValues {
			if pathArg != "" {
				value = url.PathEscape(pathArg)
			}
			path = strings.ReplaceAll(path, name, value)
		}
		req, err := http.NewRequest(op.method, e.base+path, strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("NewRequest(%s %s): %v", op.method, path, err)
		}
		// net/http refuses control characters in a query: they are sent
		// percent-encoded, so the server still decodes them.
		req.URL.RawQuery = escapeControls(rawQuery)
		req.Header.Set("Authorization", "Bearer "+tokens[op.file])
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := e.server.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", op.method, path, err)
		}
		defer resp.Body.Close()
		var answer struct {
			Reason string `json:"reason"`
		}
		dec := json.NewDecoder(resp.Body)
		_ = dec.Decode(&answer)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s?%s with %q = %d %q, want no 5xx", op.method, path, rawQuery, body, resp.StatusCode, answer.Reason)
		}
		if resp.StatusCode < 400 {
			return
		}
		for _, v := range sentValues(rawQuery, pathArg, body) {
			if strings.Contains(answer.Reason, v) && !strings.Contains(specText, v) {
				t.Fatalf("%s %s?%s with %q = %d %q: the reason repeats %q", op.method, path, rawQuery, body, resp.StatusCode, answer.Reason, v)
			}
		}
	})
}

// escapeControls percent-encodes the bytes net/http refuses in a raw query:
// controls, space and DEL.
func escapeControls(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// sentValues lists the values a request carried that are long enough to be
// told apart from the words of a reason: query values, the path argument,
// and the strings of a JSON body.
func sentValues(rawQuery, pathArg string, body []byte) []string {
	var out []string
	keep := func(s string) {
		if len(strings.TrimSpace(s)) >= 8 {
			out = append(out, s)
		}
	}
	keep(pathArg)
	if q, err := url.ParseQuery(rawQuery); err == nil {
		for _, vs := range q {
			for _, v := range vs {
				keep(v)
			}
		}
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		walkStrings(v, 0, keep)
	}
	return out
}

// walkStrings calls keep with every string of a decoded JSON value, keys
// included, down to a bounded depth.
func walkStrings(v any, depth int, keep func(string)) {
	if depth > 64 {
		return
	}
	switch x := v.(type) {
	case string:
		keep(x)
	case []any:
		for _, e := range x {
			walkStrings(e, depth+1, keep)
		}
	case map[string]any:
		for k, e := range x {
			keep(k)
			walkStrings(e, depth+1, keep)
		}
	}
}
