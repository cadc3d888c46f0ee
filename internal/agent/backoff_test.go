package agent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBackoffHonoursRetryAfter: a 503 with Retry-After (in seconds, as the
// private API declares it) makes the next retry wait at least that long,
// never longer than the backoff's cap; without one the backoff's own delay
// stands.
func TestBackoffHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header string
		want         time.Duration // the smallest delay; 0: the backoff's own
	}{
		{"seconds", "7", 7 * time.Second},
		{"above the cap", "3600", backoffMax},
		{"absent", "", 0},
		{"zero", "0", 0},
		{"negative", "-5", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if c.header != "" {
					w.Header().Set("Retry-After", c.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"kind":"Error","id":"10","href":"/e","code":"FLEET-MGMT-10","reason":"unavailable"}`))
			}))
			t.Cleanup(srv.Close)
			fc, err := NewFleetClient(srv.URL, "hub-1", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			_, err = fc.GetHubResourceKinds(t.Context())
			var se *StatusError
			if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || se.Code != "FLEET-MGMT-10" {
				t.Fatalf("GetHubResourceKinds() = %v, want a 503 StatusError with the body's code", err)
			}
			d := newBackoff().after(err)
			switch {
			case c.want == 0 && (se.RetryAfter != 0 || d > backoffMin):
				t.Errorf("Retry-After %q: RetryAfter %s, delay %s; want none and the backoff's first delay (at most %s)", c.header, se.RetryAfter, d, backoffMin)
			case c.want != 0 && (d < c.want || d > backoffMax):
				t.Errorf("Retry-After %q: delay %s, want between %s and %s", c.header, d, c.want, backoffMax)
			}
		})
	}
}
