package rest

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAcceptsGzipReadsTheQValues: gzip is used when the request names it
// (or a wildcard) with a q-value above 0, and never when it refuses it.
func TestAcceptsGzipReadsTheQValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false}, {"identity", false}, {"br", false},
		{"gzip", true}, {"GZIP", true}, {"x-gzip", true}, {"deflate, gzip", true}, {"br;q=1.0, gzip;q=0.5", true},
		{"gzip;q=0", false}, {"gzip; q=0.0", false}, {"*", true}, {"*;q=0", false}, {"gzip;q=0, *", false}, {"*, gzip;q=0", false},
	} {
		var values []string
		if tc.header != "" {
			values = []string{tc.header}
		}
		if got := acceptsGzip(values); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// TestCompressionOfAnswers: an answer of at least gzipMinBytes is gzip for a
// client that accepts it and decompresses to what the handler wrote; a
// smaller one, a 204, a HEAD and a client that does not accept gzip get the
// bytes as written; every answer says Vary: Accept-Encoding but HEAD's; with
// the flag off nothing is compressed.
func TestCompressionOfAnswers(t *testing.T) {
	t.Parallel()
	large := `{"items":[` + strings.Repeat(`{"id":"0192c3a4-0000-7000-8000-000000000000","phase":"Ready"},`, 60) + `{}]}`
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/large":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "999999")
			w.WriteHeader(http.StatusCreated)
			// In pieces, as an encoder writes.
			for i := 0; i < len(large); i += 100 {
				_, _ = io.WriteString(w, large[i:min(i+100, len(large))])
			}
		case "/small":
			_, _ = io.WriteString(w, `{"id":"x"}`)
		case "/none":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	on := (&Server{cfg: Config{Gzip: true}}).withCompression(handler)
	off := (&Server{cfg: Config{Gzip: false}}).withCompression(handler)

	for _, tc := range []struct {
		name           string
		h              http.Handler
		method, path   string
		accept         string
		wantStatus     int
		wantGzip, vary bool
		wantBody       string
	}{
		{"large, gzip accepted", on, http.MethodGet, "/large", "gzip, br", http.StatusCreated, true, true, large},
		{"large, gzip refused", on, http.MethodGet, "/large", "gzip;q=0", http.StatusCreated, false, true, large},
		{"large, no Accept-Encoding", on, http.MethodGet, "/large", "", http.StatusCreated, false, true, large},
		{"small", on, http.MethodGet, "/small", "gzip", http.StatusOK, false, true, `{"id":"x"}`},
		{"no content", on, http.MethodDelete, "/none", "gzip", http.StatusNoContent, false, true, ""},
		{"HEAD", on, http.MethodHead, "/small", "gzip", http.StatusOK, false, false, `{"id":"x"}`},
		{"flag off", off, http.MethodGet, "/large", "gzip", http.StatusCreated, false, false, large},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		if rec.Code != tc.wantStatus {
			t.Errorf("%s: status %d, want %d", tc.name, rec.Code, tc.wantStatus)
		}
		gotGzip := rec.Header().Get("Content-Encoding") == "gzip"
		if gotGzip != tc.wantGzip {
			t.Errorf("%s: Content-Encoding %q, want gzip %v", tc.name, rec.Header().Get("Content-Encoding"), tc.wantGzip)
		}
		if vary := rec.Header().Get("Vary") == "Accept-Encoding"; vary != tc.vary {
			t.Errorf("%s: Vary %q, want Accept-Encoding %v", tc.name, rec.Header().Get("Vary"), tc.vary)
		}
		body := rec.Body.Bytes()
		if gotGzip {
			if rec.Header().Get("Content-Length") != "" {
				t.Errorf("%s: a compressed answer keeps Content-Length %q", tc.name, rec.Header().Get("Content-Length"))
			}
			if len(body) >= len(large)/2 {
				t.Errorf("%s: %d compressed bytes of %d", tc.name, len(body), len(large))
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: gzip.NewReader: %v", tc.name, err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: reading the gzip stream: %v", tc.name, err)
			}
		}
		if string(body) != tc.wantBody {
			t.Errorf("%s: body %.80q, want %.80q", tc.name, body, tc.wantBody)
		}
	}
}
