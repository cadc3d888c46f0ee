package config

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// NewFileTokenSource returns the bearer token in the file at path (a
// mounted Secret or a projected service-account token), read again whenever
// the file's modification time or size moves: Kubernetes rotates such files
// by swapping a symlink, and a rotated token needs no restart.
func NewFileTokenSource(path string) oauth2.TokenSource {
	return &fileTokenSource{path: path}
}

type fileTokenSource struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	token   string
}

// Token returns the file's current token.
func (s *fileTokenSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if s.token == "" || !fi.ModTime().Equal(s.modTime) || fi.Size() != s.size {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("token file %s is empty", s.path)
		}
		s.token, s.modTime, s.size = tok, fi.ModTime(), fi.Size()
	}
	return &oauth2.Token{AccessToken: s.token, TokenType: "Bearer"}, nil
}
