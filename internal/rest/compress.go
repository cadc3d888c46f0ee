package rest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipMinBytes is the smallest answer compressed: below about one packet
// the gzip header and the CPU cost more than they save.
const gzipMinBytes = 1024

// gzipWriters are reused: a gzip.Writer holds its compressor's tables,
// too large to allocate per answer. The writer is klauspost/compress's, a
// drop-in for compress/gzip whose fastest level spends a fraction of the
// standard library's CPU on the same answer for a similar size
// (BenchmarkGzipClusterPage).
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// withCompression compresses an answer of at least gzipMinBytes with gzip
// when the request accepts it (Accept-Encoding, as RFC 9110 reads it: a
// q-value of 0 refuses), as OCM's services do. Answers to HEAD, and those
// that already name an encoding, pass as they are. Every answer that
// could have been compressed says Vary: Accept-Encoding, so that a cache
// keeps the two apart.
func (s *Server) withCompression(next http.Handler) http.Handler {
	if !s.cfg.Gzip {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w}
		defer cw.finish()
		next.ServeHTTP(cw, r)
	})
}

// acceptsGzip reads the Accept-Encoding values: gzip (or x-gzip, or *) with
// a q-value above 0.
func acceptsGzip(values []string) bool {
	accepted := false
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				if name, value, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(name), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
						q = f
					}
				}
			}
			if coding == "*" {
				// A wildcard stands for gzip only when gzip is not named.
				accepted = accepted || q > 0
				continue
			}
			return q > 0
		}
	}
	return accepted
}

// compressWriter holds an answer's first bytes until it knows whether the
// answer reaches gzipMinBytes: then it compresses the rest as it comes;
// else finish writes the bytes as they are.
type compressWriter struct {
	http.ResponseWriter
	status  int
	buf     bytes.Buffer
	gz      *gzip.Writer
	decided bool
}

func (c *compressWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.decided {
		if c.gz != nil {
			return c.gz.Write(p)
		}
		return c.ResponseWriter.Write(p)
	}
	c.buf.Write(p)
	if c.buf.Len() >= gzipMinBytes {
		c.decide(true)
	}
	return len(p), nil
}

// decide sends the header, compressed or not, and what was held.
func (c *compressWriter) decide(large bool) {
	c.decided = true
	h := c.Header()
	compress := large && h.Get("Content-Encoding") == "" && c.status != http.StatusNoContent && c.status != http.StatusNotModified
	if compress {
		h.Set("Content-Encoding", "gzip")
		h.Del("Content-Length")
		c.gz = gzipWriters.Get().(*gzip.Writer)
		c.gz.Reset(c.ResponseWriter)
	}
	c.ResponseWriter.WriteHeader(c.status)
	if c.buf.Len() == 0 {
		return
	}
	if c.gz != nil {
		_, _ = c.gz.Write(c.buf.Bytes())
	} else {
		_, _ = c.ResponseWriter.Write(c.buf.Bytes())
	}
	c.buf.Reset()
}

// finish ends the answer: what is held goes out as it is, and the gzip
// stream is closed and its writer returned to the pool.
func (c *compressWriter) finish() {
	if !c.decided {
		if c.status == 0 {
			return // nothing was written: net/http answers 200 with no body
		}
		c.decide(false)
	}
	if c.gz != nil {
		_ = c.gz.Close()
		gzipWriters.Put(c.gz)
		c.gz = nil
	}
}
