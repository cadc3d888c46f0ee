package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNewMigratedDatabaseIsCurrent checks that a test's database carries every
// migration this binary knows, and that two databases do not share rows.
func TestNewMigratedDatabaseIsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := NewMigratedDatabase(t)
	b, _ := NewMigratedDatabase(t)
	status, err := a.SchemaStatus(ctx)
	if err != nil {
		t.Fatalf("SchemaStatus(): %v", err)
	}
	if len(status.Missing) != 0 || len(status.Unknown) != 0 {
		t.Fatalf("SchemaStatus() = %+v, want every migration applied and none unknown", status)
	}
	if err := a.Gorm.Exec("CREATE TABLE only_in_a (id int)").Error; err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	var tables []string
	if err := b.Gorm.Raw("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").Scan(&tables).Error; err != nil {
		t.Fatalf("listing tables: %v", err)
	}
	if slices.Contains(tables, "only_in_a") {
		t.Fatalf("a table created in one test database shows in another")
	}
}

// TestMigrationsDigestSeesAnEditedMigration checks that the template's hash
// changes when a migration's file changes under the same ids, and when the
// ids change, and not when another file of the package does.
func TestMigrationsDigestSeesAnEditedMigration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"202601010000"}
	write("migration_202601010000_a.go", "CREATE TABLE a (id int)")
	write("store.go", "package postgres")
	first := migrationsDigest(ids, dir)
	write("store.go", "package postgres // changed")
	if !bytes.Equal(migrationsDigest(ids, dir), first) {
		t.Errorf("a file that holds no migration changed the digest")
	}
	write("migration_202601010000_a.go", "CREATE TABLE a (id bigint)")
	edited := migrationsDigest(ids, dir)
	if bytes.Equal(edited, first) {
		t.Errorf("a migration edited under its id left the digest as it was")
	}
	if bytes.Equal(migrationsDigest(append(ids, "202601020000"), dir), edited) {
		t.Errorf("a new migration id left the digest as it was")
	}
}

// BenchmarkNewMigratedDatabase measures what a test pays for its database.
func BenchmarkNewMigratedDatabase(b *testing.B) {
	for b.Loop() {
		NewMigratedDatabase(b)
	}
}

// TestBuildTemplateConcurrently races several builders of one template, as
// test binaries of several packages do: each must find it complete, and
// copies of it must be creatable at once.
func TestBuildTemplateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := "fmtpl_race_" + randomSuffix(t)
	t.Cleanup(func() {
		server := ServerConfig()
		conn, err := connectServer(ctx, server)
		if err != nil {
			t.Errorf("pgtest: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE false"); err != nil {
			t.Errorf("un-templating %s: %v", name, err)
		}
		dropDatabase(t, server, name)
	})
	for i := range 4 {
		t.Run(fmt.Sprint("builder", i), func(t *testing.T) {
			t.Parallel()
			if err := buildTemplate(ctx, name); err != nil {
				t.Fatalf("buildTemplate(): %v", err)
			}
			status, err := Open(t, newDatabase(t, name)).SchemaStatus(ctx)
			if err != nil {
				t.Fatalf("SchemaStatus(): %v", err)
			}
			if len(status.Missing) != 0 {
				t.Fatalf("a copy of the template misses migrations %v", status.Missing)
			}
		})
	}
}
