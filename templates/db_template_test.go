package templates_test

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/onsi/gomega"
)

func TestDBTemplateServesTheServiceSecret(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	svcTpl, pod, _ := serviceDeployment(t)
	dbTpl := load(t, dbFile)

	var secret struct {
		Metadata   metadata          `json:"metadata,omitzero"`
		StringData map[string]string `json:"stringData,omitempty"`
	}
	decode(t, dbTpl, "Secret", &secret)
	secretName := expand(t, dbTpl, secret.Metadata.Name)
	if want := expand(t, dbTpl, "${DB_SECRET_NAME}"); secretName != want {
		t.Errorf("db Secret name = %q, want %q (DB_SECRET_NAME)", secretName, want)
	}
	mounted := slices.ContainsFunc(pod.Volumes, func(v volume) bool {
		return v.Secret != nil && expand(t, svcTpl, v.Secret.SecretName) == secretName
	})
	if !mounted {
		t.Errorf("service Deployment mounts no secret named %q (db template's DB_SECRET_NAME)", secretName)
	}
	g.Expect(slices.Collect(maps.Keys(secret.StringData))).To(gomega.ContainElements(
		"db.host", "db.port", "db.name", "db.user", "db.password"), "keys of Secret %s", secretName)

	var svc service
	decode(t, dbTpl, "Service", &svc)
	if got, want := expand(t, dbTpl, secret.StringData["db.host"]), expand(t, dbTpl, svc.Metadata.Name); got != want {
		t.Errorf("secret db.host = %q, want %q (the database Service)", got, want)
	}
	if len(svc.Spec.Ports) != 1 || strconv.Itoa(svc.Spec.Ports[0].Port) != secret.StringData["db.port"] {
		t.Errorf("secret db.port = %q, want the database Service's port %+v", secret.StringData["db.port"], svc.Spec.Ports)
	}

	var d deployment
	decode(t, dbTpl, "Deployment", &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("db Deployment containers = %d, want 1", len(d.Spec.Template.Spec.Containers))
	}
	pg := d.Spec.Template.Spec.Containers[0]
	wantEnv := map[string]string{
		"POSTGRESQL_USER":     "db.user",
		"POSTGRESQL_PASSWORD": "db.password",
		"POSTGRESQL_DATABASE": "db.name",
	}
	for _, name := range slices.Sorted(maps.Keys(wantEnv)) {
		i := slices.IndexFunc(pg.Env, func(e envVar) bool { return e.Name == name })
		if i < 0 || pg.Env[i].ValueFrom == nil || pg.Env[i].ValueFrom.SecretKeyRef == nil {
			t.Errorf("postgresql env %s: want it from secret key %s", name, wantEnv[name])
			continue
		}
		ref := pg.Env[i].ValueFrom.SecretKeyRef
		if expand(t, dbTpl, ref.Name) != secretName || ref.Key != wantEnv[name] {
			t.Errorf("postgresql env %s from %s/%s, want %s/%s", name, ref.Name, ref.Key, secretName, wantEnv[name])
		}
	}
	var readiness []string
	if p := pg.ReadinessProbe; p != nil && p.Exec != nil {
		readiness = p.Exec.Command
	}
	if len(readiness) == 0 || readiness[0] != "pg_isready" {
		t.Errorf("postgresql readinessProbe.exec.command = %q, want pg_isready ...", readiness)
	}
}
