package usermetrics

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestClusterCacheExpires(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1700000000, 0)
	c := newClusterCache(10 * time.Second)
	c.now = func() time.Time { return now }
	_, ok := c.get("org:a")
	g.Expect(ok).To(BeFalse())
	c.put("org:a", []string{"a-1"})
	got, ok := c.get("org:a")
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal([]string{"a-1"}))
	_, ok = c.get("org:b")
	g.Expect(ok).To(BeFalse(), "another organisation's entry")
	now = now.Add(10 * time.Second)
	_, ok = c.get("org:a")
	g.Expect(ok).To(BeFalse(), "an entry past its TTL")
}

func TestClusterCacheOff(t *testing.T) {
	g := NewWithT(t)
	c := newClusterCache(0)
	c.put("org:a", []string{"a-1"})
	_, ok := c.get("org:a")
	g.Expect(ok).To(BeFalse())
}

func TestClusterCacheBounded(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1700000000, 0)
	c := newClusterCache(time.Minute)
	c.now = func() time.Time { return now }
	for i := range maxCachedOrgs {
		c.put(string(rune(i)), nil)
	}
	g.Expect(c.entries).To(HaveLen(maxCachedOrgs))
	c.put("one more", []string{"x"})
	g.Expect(len(c.entries)).To(BeNumerically("<=", maxCachedOrgs))
	_, ok := c.get("one more")
	g.Expect(ok).To(BeTrue())
}
