package migrations

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// contractChanges are the schema changes a release still running on the
// schema can trip over: it reads or writes what they remove, rename, retype
// or newly forbid. docs/migrations.md keeps them for a contract step.
var contractChanges = []struct {
	name string
	re   *regexp.Regexp
}{
	{"drops a table, column, view or function", regexp.MustCompile(`(?i)\bDROP\s+(TABLE|COLUMN|VIEW|MATERIALIZED\s+VIEW|FUNCTION|TYPE)\b`)},
	{"renames a table or column", regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(ONLY\s+)?\S+\s+RENAME\b`)},
	{"changes a column's type", regexp.MustCompile(`(?i)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`)},
	{"makes a column NOT NULL", regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`)},
	{"adds a NOT NULL column without a default", regexp.MustCompile(`(?i)\bADD\s+COLUMN\s[^,;]*\bNOT\s+NULL\b[^,;]*`)},
	{"adds a constraint old writers may break", regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(ONLY\s+)?(\S+)\s+ADD\s+(CONSTRAINT\s+\S+\s+)?(CHECK|UNIQUE|FOREIGN\s+KEY|PRIMARY\s+KEY)\b`)},
	{"adds a unique index", regexp.MustCompile(`(?i)\bCREATE\s+UNIQUE\s+INDEX\s+(CONCURRENTLY\s+)?(IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(ONLY\s+)?(\S+)`)},
}

// contractMarkers are the comments that own up to a change the rule would
// refuse, with the reason after the colon: a contract step, or a change
// reviewed as harmless to the previous release (docs/migrations.md).
var contractMarkers = []string{"// Contract step:", "// Safe for the previous release:"}

// createdTable finds the tables a migration creates: constraints and unique
// indexes on them bind no earlier writer.
var createdTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\S+)`)

var hasDefault = regexp.MustCompile(`(?i)\bDEFAULT\b`)

// TestMigrationsExpandOnly holds every migration the previous release did not
// have to the expand-deploy-contract rule: its Migrate may only add what the
// previous release ignores, unless its file carries the contract marker.
func TestMigrationsExpandOnly(t *testing.T) {
	previous := previousReleaseFiles(t)
	files, err := filepath.Glob("migration_*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || previous[file] {
			continue
		}
		checked++
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(contractMarkers, func(m string) bool { return strings.Contains(string(src), m) }) {
			continue
		}
		for _, change := range contractChangesIn(strings.Join(migrateSQL(t, file, src), ";\n")) {
			t.Errorf("%s: Migrate %s: the previous release may still run on this schema; "+
				"expand now and contract in a later release (docs/migrations.md), or say why in a comment %q", file, change, contractMarkers[0])
		}
	}
	t.Logf("%d migrations newer than the previous release checked", checked)
}

// TestContractChangesAreCaught shows each contract change is caught, and
// that what expands passes.
func TestContractChangesAreCaught(t *testing.T) {
	caught := func(sql string) bool { return len(contractChangesIn(sql)) > 0 }
	for sql, want := range map[string]bool{
		`ALTER TABLE hubs DROP COLUMN capacity`:                         true,
		`ALTER TABLE hubs RENAME COLUMN capacity TO size`:               true,
		`ALTER TABLE hubs ALTER COLUMN capacity TYPE bigint`:            true,
		`ALTER TABLE hubs ALTER COLUMN zone SET NOT NULL`:               true,
		`ALTER TABLE hubs ADD COLUMN tier text NOT NULL`:                true,
		`ALTER TABLE hubs ADD CONSTRAINT tier_known CHECK (tier <> '')`: true,
		`CREATE UNIQUE INDEX hubs_tier ON hubs (tier)`:                  true,
		`DROP VIEW cluster_view`:                                        true,
		`ALTER TABLE hubs ADD COLUMN tier text NOT NULL DEFAULT 'a'`:    false,
		`ALTER TABLE hubs ADD COLUMN tier text`:                         false,
		`CREATE INDEX hubs_tier ON hubs (tier)`:                         false,
		`CREATE TABLE tiers (id text PRIMARY KEY)`:                      false,
		`ALTER TABLE hubs SET (autovacuum_vacuum_scale_factor = 0.01)`:  false,
	} {
		if got := caught(sql); got != want {
			t.Errorf("caught(%q) = %v, want %v", sql, got, want)
		}
	}
}

// contractChangesIn names the contract changes in a migration's SQL, each
// with the text that shows it.
func contractChangesIn(sql string) []string {
	created := map[string]bool{}
	for _, m := range createdTable.FindAllStringSubmatch(sql, -1) {
		created[strings.ToLower(m[2])] = true
	}
	var found []string
	for _, statement := range strings.Split(sql, ";") {
		for _, c := range contractChanges {
			m := c.re.FindStringSubmatch(statement)
			switch {
			case m == nil:
			case strings.Contains(c.name, "without a default") && hasDefault.MatchString(m[0]):
			case strings.HasPrefix(c.name, "adds a") && strings.Contains(c.name, "constraint") && created[strings.ToLower(m[3])]:
			case strings.HasPrefix(c.name, "adds a unique") && created[strings.ToLower(m[4])]:
			default:
				found = append(found, fmt.Sprintf("%s (%q)", c.name, strings.Join(strings.Fields(m[0]), " ")))
			}
		}
	}
	return found
}

// previousReleaseFiles lists the migration files of the commit
// scripts/release/previous-release names, from git: those of this
// directory, and of internal/postgres, where they were before they had a
// package of their own.
func previousReleaseFiles(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../../../scripts/release/previous-release")
	if err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	out, err := exec.Command("git", "ls-tree", "--name-only", commit, "./", "../").Output()
	if err != nil {
		t.Fatalf("git ls-tree %s (the previous release; a shallow clone lacks it: git fetch --unshallow): %v", commit, err)
	}
	files := map[string]bool{}
	for _, name := range strings.Fields(string(out)) {
		files[filepath.Base(name)] = true
	}
	if len(files) == 0 {
		t.Fatalf("git ls-tree %s listed no files", commit)
	}
	return files
}

// migrateSQL returns the string constants inside the Migrate functions of a
// migration file: its forward SQL, not its Rollback's.
func migrateSQL(t *testing.T, file string, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "Migrate" {
			return true
		}
		ast.Inspect(kv.Value, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					sql = append(sql, s)
				}
			}
			return true
		})
		return false
	})
	return sql
}
