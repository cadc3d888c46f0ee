package rest

import (
	"encoding/json"
	"testing"
	"time"
)

// TestTimeFieldWritesWhatEncodingJSONWrites compares the answers' times,
// written without time.Time's Marshaler, with what encoding/json writes for
// the same times: UTC and other offsets, with and without fractions.
func TestTimeFieldWritesWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	east := time.FixedZone("east", 5*3600+30*60)
	for _, tm := range []time.Time{
		time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC),
		time.Date(1999, 1, 2, 3, 4, 5, 6, east),
		time.Date(2026, 6, 30, 23, 59, 59, 999999999, time.FixedZone("west", -7*3600)),
	} {
		j := newJSONBuilder().(*jsonBuilder)
		j.buf.WriteByte('{')
		j.timeField("at", tm)
		want, err := json.Marshal(map[string]time.Time{"at": tm})
		if err != nil {
			t.Fatal(err)
		}
		if got := j.buf.String() + "}"; got != string(want) {
			t.Errorf("timeField(%v) = %s; encoding/json writes %s", tm, got, want)
		}
	}
}
