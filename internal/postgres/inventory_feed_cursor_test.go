package postgres

import (
	"encoding/base64"
	"testing"
)

func TestWidenXid(t *testing.T) {
	t.Parallel()
	const epoch = uint64(3) << 32
	cases := []struct {
		x    uint32
		xmax uint64
		want uint64
	}{
		{100, epoch + 200, epoch + 100},     // below xmax, same epoch
		{300, epoch + 200, epoch + 300},     // above xmax: assigned after the last completed
		{0xFFFFFFF0, epoch + 5, epoch - 16}, // before the wrap, xmax after it
		{3, epoch - 10, epoch + 3},          // after the wrap, xmax before it
		{7, 7, 7},                           // epoch 0
	}
	for _, tc := range cases {
		if got := widenXid(tc.x, tc.xmax); got != tc.want {
			t.Errorf("widenXid(%d, %d) = %d, want %d", tc.x, tc.xmax, got, tc.want)
		}
	}
}

func TestParseCursor(t *testing.T) {
	t.Parallel()
	for _, p := range []changePosition{{}, {Xid: 1, Seq: 2}, {Xid: 1 << 40, Seq: 1 << 50}, {Xid: 3, Seq: 4, LSN: 1 << 33}} {
		got, err := parseCursor(p.cursor())
		if err != nil || got != p {
			t.Errorf("parseCursor(%q) = %+v, %v; want %+v", p.cursor(), got, err, p)
		}
	}
	for _, bad := range []string{"1.2", "1.2.3.4.5", "1.2.3.x", "2.2.3"} {
		c := base64.RawURLEncoding.EncodeToString([]byte(bad))
		if got, err := parseCursor(c); err == nil {
			t.Errorf("parseCursor(%q) = %+v, want an error", bad, got)
		}
	}
	if got, err := parseCursor(""); err != nil || got != (changePosition{}) {
		t.Errorf("parseCursor(\"\") = %+v, %v; want the start", got, err)
	}
}
