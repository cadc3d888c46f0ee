package cli

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const clusterBody = `{"kind":"Cluster","id":"c1","href":"/api/fleet_manager/v1/clusters/c1","name":"prod-1","product":"ROSA",
"zone":"eu","region":"eu-west-1","hub":{"id":"h1","name":"hub-eu-1"},"phase":"provisioning","generation":12345678901234567,
"labels":{"env":"prod","team":"a"},"created_at":"2026-12-03T08:00:00.123Z",
"conditions":[{"type":"Accepted","status":"True","reason":"Validated"},{"type":"Delivered","status":"False","reason":"PublishedToAgent"}]}`

func TestPrinterTable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cols := append(clusterColumns, field("LABELS", "labels"), field("CREATED", "created_at"), field("GEN", "generation"))
	if err := (printer{w: &out, format: formatTable}).object([]byte(clusterBody), cols); err != nil {
		t.Fatalf("object() = %v", err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("table = %q, want a header and one row", out.String())
	}
	for _, want := range []string{"ID", "NAME", "HUB", "PHASE", "CONDITIONS", "LABELS"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q lacks %s", lines[0], want)
		}
	}
	for _, want := range []string{"c1", "prod-1", "hub-eu-1", "provisioning", "Accepted=True Delivered=False:PublishedToAgent",
		"env=prod,team=a", "2026-12-03T08:00:00Z", "12345678901234567"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	// The columns line up: each header starts where its cell starts.
	if strings.Index(lines[0], "NAME") != strings.Index(lines[1], "prod-1") {
		t.Errorf("NAME at %d, prod-1 at %d: columns not aligned\n%s", strings.Index(lines[0], "NAME"), strings.Index(lines[1], "prod-1"), out.String())
	}
}

func TestPrinterJSONAndYAML(t *testing.T) {
	t.Parallel()
	var js, ys bytes.Buffer
	if err := (printer{w: &js, format: formatJSON}).object([]byte(clusterBody), clusterColumns); err != nil {
		t.Fatalf("object(json) = %v", err)
	}
	if !strings.Contains(js.String(), "\n  \"name\": \"prod-1\",\n") || !strings.Contains(js.String(), "12345678901234567") {
		t.Errorf("json output = %s, want the body indented, numbers exact", js.String())
	}
	if err := (printer{w: &ys, format: formatYAML}).object([]byte(clusterBody), clusterColumns); err != nil {
		t.Fatalf("object(yaml) = %v", err)
	}
	for _, want := range []string{"name: prod-1\n", "hub:\n  id: h1\n  name: hub-eu-1\n", "- reason: Validated\n"} {
		if !strings.Contains(ys.String(), want) {
			t.Errorf("yaml output lacks %q:\n%s", want, ys.String())
		}
	}
}

func TestValidFormat(t *testing.T) {
	t.Parallel()
	for f, ok := range map[string]bool{"table": true, "json": true, "yaml": true, "xml": false, "": false} {
		if err := validFormat(f); (err == nil) != ok {
			t.Errorf("validFormat(%q) = %v, want ok %v", f, err, ok)
		}
	}
}

func TestAPIError(t *testing.T) {
	t.Parallel()
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/api/fleet_manager/v1/clusters/x"}}
	for _, tc := range []struct {
		status int
		header string
		body   string
		code   int
		msg    string
	}{
		{404, "", `{"kind":"Error","id":"4","href":"/api/fleet_manager/v1/errors/4","code":"FLEET-MGMT-4","reason":"cluster not found","operation_id":"op-1"}`,
			ExitRefused, "cluster not found (FLEET-MGMT-4, operation op-1)"},
		{409, "op-2", `{"kind":"Error","id":"19","code":"FLEET-MGMT-19","reason":"the name is taken"}`,
			ExitRefused, "the name is taken (FLEET-MGMT-19, operation op-2)"},
		{503, "", `{"kind":"Error","id":"9","code":"FLEET-MGMT-9","reason":"unavailable","operation_id":"op-3"}`,
			ExitServer, "unavailable (FLEET-MGMT-9, operation op-3)"},
		{502, "", `<html>bad gateway</html>`, ExitServer, "GET /api/fleet_manager/v1/clusters/x answered 502 Bad Gateway"},
	} {
		resp := &http.Response{StatusCode: tc.status, Status: strconv.Itoa(tc.status) + " " + http.StatusText(tc.status), Header: http.Header{}, Request: req}
		if tc.header != "" {
			resp.Header.Set("X-Operation-ID", tc.header)
		}
		code, msg := exitCode(apiError(resp, []byte(tc.body)))
		if code != tc.code || msg != tc.msg {
			t.Errorf("apiError(%d, %s) = %d %q, want %d %q", tc.status, tc.body, code, msg, tc.code, tc.msg)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://localhost:8000":                          "http://localhost:8000/api/fleet_manager/v1",
		"https://fleet.example.com/":                     "https://fleet.example.com/api/fleet_manager/v1",
		"https://fleet.example.com/api/other/v2/":        "https://fleet.example.com/api/other/v2",
		"http://localhost:8000/api/fleet_manager/v1?x=1": "http://localhost:8000/api/fleet_manager/v1",
		"localhost:8000":                                 "",
		"ftp://x":                                        "",
	} {
		got, err := normalizeURL(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("normalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestJWTExpiry(t *testing.T) {
	t.Parallel()
	// {"alg":"none"}.{"exp":1900000000}.sig
	tok := "eyJhbGciOiJub25lIn0.eyJleHAiOjE5MDAwMDAwMDB9.c2ln"
	if got := jwtExpiry(tok); !got.Equal(time.Unix(1900000000, 0)) {
		t.Errorf("jwtExpiry(exp 1900000000) = %v", got)
	}
	if got := jwtExpiry("opaque-token"); !got.IsZero() {
		t.Errorf("jwtExpiry(opaque) = %v, want zero", got)
	}
}
