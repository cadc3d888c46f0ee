package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenWithoutAnIdentityNamesBothFlags(t *testing.T) {
	t.Parallel()
	keyDir := filepath.Join(t.TempDir(), "auth")
	out, _, err := execute(t, nil, "token", "--auth-dev-key-dir="+keyDir, "--org=org-1")
	if err == nil || !strings.Contains(err.Error(), "--user") || !strings.Contains(err.Error(), "--agent") {
		t.Fatalf("token without --user or --agent = %q, %v; want an error naming --user and --agent", out, err)
	}
	if out != "" {
		t.Errorf("token without --user or --agent printed %q; want nothing", out)
	}
	if _, err := os.Stat(keyDir); !os.IsNotExist(err) {
		t.Errorf("token without --user or --agent created %s (%v); want no key made for a refused request", keyDir, err)
	}
	for _, flag := range []string{"--user=ann", "--agent=agent-1"} {
		out, _, err := execute(t, nil, "token", "--auth-dev-key-dir="+keyDir, "--org=org-1", flag)
		if err != nil || strings.Count(strings.TrimSpace(out), ".") != 2 {
			t.Errorf("token %s = %q, %v; want a JWT", flag, out, err)
		}
	}
}
