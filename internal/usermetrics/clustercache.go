package usermetrics

import (
	"sync"
	"time"
)

// clusterCache keeps each organisation's cluster label values for a short
// while, so a dashboard's many queries read the inventory once, not once
// each. A cluster that leaves the organisation is read for at most the TTL
// more; zero turns the cache off.
type clusterCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cachedClusters
}

type cachedClusters struct {
	values  []string
	expires time.Time
}

// maxCachedOrgs bounds the cache: past it, expired entries are dropped, and
// if none had expired, all of them.
const maxCachedOrgs = 10000

func newClusterCache(ttl time.Duration) *clusterCache {
	return &clusterCache{ttl: ttl, now: time.Now, entries: map[string]cachedClusters{}}
}

func (c *clusterCache) get(key string) ([]string, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		return nil, false
	}
	return e.values, true
}

func (c *clusterCache) put(key string, values []string) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedOrgs {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedOrgs {
			clear(c.entries)
		}
	}
	c.entries[key] = cachedClusters{values: values, expires: now.Add(c.ttl)}
}
