package dnstest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetmanager/fleet-manager/internal/childproc"
)

// NamedEnv and KnotdEnv name the environment variables that hold named's
// and knotd's paths.
const (
	NamedEnv = "NAMED_BIN"
	KnotdEnv = "KNOTD_BIN"
)

const installScript = "scripts/dbops/ensure-tools.sh"

// Waits of a primary's life.
const (
	readyTimeout = 30 * time.Second
	stopGrace    = 10 * time.Second
	// portAttempts bounds the tries when another process takes the port
	// between choosing it and named's bind.
	portAttempts = 3
	// tsigSecretBytes is the length of a test key (RFC 8945 wants at least
	// the hash's output).
	tsigSecretBytes = 32
)

// Primary is a running authoritative server, BIND 9's named or Knot's
// knotd, primary of one zone that its TSIG key may update (RFC 2136),
// without recursion.
type Primary struct {
	// Name is the server's, "named" or "knotd".
	Name string
	// Addr is "127.0.0.1:port", UDP and TCP.
	Addr string
	// Zone is the zone's apex, without the final dot.
	Zone string
	// KeyName, Algorithm and Secret are the TSIG key that may update every
	// name of the zone (Secret in base64).
	KeyName, Algorithm, Secret string

	bin, dir, conf string
	args           []string
	proc           *childproc.Process
}

// StartBIND starts BIND 9's named for zone and waits until it answers the
// zone's SOA over UDP and TCP; it is stopped when the test ends. It fails
// the test when named cannot start; it never skips. named runs in the
// foreground (-g: its log is the child's output), as the user running the
// test, root included (no -u: it keeps that user).
func StartBIND(t testing.TB, zone string) *Primary {
	t.Helper()
	bin, err := NamedBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := newPrimary(t, "named", bin, zone)
	p.conf = filepath.Join(p.dir, "named.conf")
	p.args = []string{"-g", "-4", "-n", "1", "-c", p.conf}
	p.start(t, p.namedConfig)
	return p
}

// StartKnot starts Knot DNS's knotd for zone, as StartBIND starts named: a
// second implementation of RFC 2136 and TSIG. knotd runs in the foreground
// and logs to its standard error.
func StartKnot(t testing.TB, zone string) *Primary {
	t.Helper()
	bin, err := KnotdBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := newPrimary(t, "knotd", bin, zone)
	p.conf = filepath.Join(p.dir, "knot.conf")
	p.args = []string{"-c", p.conf}
	// knotd's control socket is in its run folder: a short one, within
	// the length of a socket's path that test folders can pass.
	run, err := os.MkdirTemp("", "knotd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	p.start(t, func(port int) string { return p.knotConfig(port, run) })
	return p
}

// newPrimary makes a primary's folder, zone file and TSIG key.
func newPrimary(t testing.TB, name, bin, zone string) *Primary {
	t.Helper()
	secret := make([]byte, tsigSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	p := &Primary{Name: name, Zone: zone, KeyName: "fleet-manager-test.", Algorithm: "hmac-sha256",
		Secret: base64.StdEncoding.EncodeToString(secret), bin: bin, dir: t.TempDir()}
	zoneFile := "$TTL 60\n@ IN SOA ns1." + zone + ". hostmaster." + zone + ". 1 60 60 3600 5\n@ IN NS ns1." + zone + ".\nns1 IN A 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(p.dir, "zone.db"), []byte(zoneFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// start writes the configuration for a free port and runs the server,
// on other ports when another process took the port first.
func (p *Primary) start(t testing.TB, config func(port int) string) {
	t.Helper()
	t.Cleanup(p.Stop)
	for attempt := 1; ; attempt++ {
		port, err := freeUDPAndTCPPort()
		if err != nil {
			t.Fatal(err)
		}
		p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := os.WriteFile(p.conf, []byte(config(port)), 0o600); err != nil {
			t.Fatal(err)
		}
		err = p.run()
		if err == nil {
			break
		}
		p.proc.Stop(stopGrace)
		if !portTaken(err) || attempt == portAttempts {
			t.Fatalf("dnstest: %v", err)
		}
	}
	t.Logf("dnstest: %s for %s at %s", p.Name, p.Zone, p.Addr)
}

// namedConfig is named.conf: everything in the test's folder, no control
// channel, no recursion, the zone updatable by the key.
func (p *Primary) namedConfig(port int) string {
	return fmt.Sprintf(`options {
	directory %[1]q;
	pid-file %[2]q;
	session-keyfile %[3]q;
	managed-keys-directory %[1]q;
	listen-on port %[4]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	allow-query { any; };
	dnssec-validation no;
	notify no;
};
controls { };
key %[5]q {
	algorithm %[6]s;
	secret %[7]q;
};
zone %[8]q {
	type primary;
	file "zone.db";
	journal "zone.db.jnl";
	update-policy { grant %[5]s zonesub ANY; };
};
`, p.dir, filepath.Join(p.dir, "named.pid"), filepath.Join(p.dir, "session.key"), port, p.KeyName, p.Algorithm, p.Secret, p.Zone)
}

// knotConfig is knotd's configuration: everything in the test's folder
// but the run folder, the zone updatable by the key (knotd never recurses).
func (p *Primary) knotConfig(port int, run string) string {
	return fmt.Sprintf(`server:
    rundir: %[1]q
    listen: 127.0.0.1@%[2]d
database:
    storage: %[3]q
key:
  - id: %[4]s
    algorithm: %[5]s
    secret: %[6]s
acl:
  - id: update
    key: %[4]s
    action: update
zone:
  - domain: %[7]s
    storage: %[3]q
    file: zone.db
    acl: update
log:
  - target: stderr
    any: info
`, run, port, p.dir, p.KeyName, p.Algorithm, p.Secret, p.Zone)
}

// run starts the server and waits until it answers.
func (p *Primary) run() error {
	var err error
	p.proc, err = childproc.Start(childproc.Options{Name: p.Name, Dir: p.dir, LogPath: filepath.Join(p.dir, p.Name+".log")},
		p.bin, p.args...)
	if err != nil {
		return err
	}
	return p.proc.WaitReady(readyTimeout, func() error {
		for _, network := range []string{"udp", "tcp"} {
			if err := p.probe(network); err != nil {
				return err
			}
		}
		return nil
	})
}

// probe asks the zone's SOA and wants an authoritative answer.
func (p *Primary) probe(network string) error {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(p.Zone), dns.TypeSOA)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, _, err := (&dns.Client{Net: network, Timeout: time.Second}).ExchangeContext(ctx, q, p.Addr)
	if err != nil {
		return err
	}
	if resp.Rcode != dns.RcodeSuccess || !resp.Authoritative || len(resp.Answer) == 0 {
		return fmt.Errorf("SOA %s over %s: rcode %s, authoritative %t", p.Zone, network, dns.RcodeToString[resp.Rcode], resp.Authoritative)
	}
	return nil
}

// Stop stops the server (a provider outage); the zone and its journal
// stay.
func (p *Primary) Stop() { p.proc.Stop(stopGrace) }

// Start starts a stopped server again on the same address, with the zone
// as it was (its journal holds the updates), and waits until it answers.
func (p *Primary) Start(t testing.TB) {
	t.Helper()
	if p.proc.Exited() == nil {
		t.Fatalf("dnstest: %s is running", p.Name)
	}
	if err := p.run(); err != nil {
		t.Fatalf("dnstest: restarting %s: %v", p.Name, err)
	}
}

// LogTail returns the last n lines of the server's log.
func (p *Primary) LogTail(n int) string { return p.proc.LogTail(n) }

// NamedBinary returns named: $NAMED_BIN, else the PATH's, else Debian's
// /usr/sbin/named (not on an ordinary user's PATH).
func NamedBinary() (string, error) { return binary(NamedEnv, "named", "bind9") }

// KnotdBinary returns knotd: $KNOTD_BIN, else the PATH's, else Debian's
// /usr/sbin/knotd.
func KnotdBinary() (string, error) { return binary(KnotdEnv, "knotd", "knot") }

func binary(env, name, pkg string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("dnstest: %s=%s is no executable", env, bin)
		}
		return bin, nil
	}
	if bin, err := exec.LookPath(name); err == nil {
		return bin, nil
	}
	debian := "/usr/sbin/" + name
	if info, err := os.Stat(debian); err == nil && info.Mode()&0o111 != 0 {
		return debian, nil
	}
	return "", fmt.Errorf("dnstest: no %s: run %s (it installs Debian's %s package; %s chooses another binary)", name, installScript, pkg, env)
}

// freeUDPAndTCPPort returns a loopback port free for both TCP and UDP a
// moment ago.
func freeUDPAndTCPPort() (int, error) {
	for range portAttempts * 10 {
		ports, err := childproc.FreePorts(1)
		if err != nil {
			return 0, err
		}
		if c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))); err == nil {
			c.Close()
			return ports[0], nil
		}
	}
	return 0, fmt.Errorf("dnstest: no loopback port free for both UDP and TCP")
}

// portTaken reports whether the server ended because its port was taken
// (named's words differ from childproc.PortTaken's).
func portTaken(err error) bool {
	exited, ok := errors.AsType[*childproc.ExitedError](err)
	return childproc.PortTaken(err) || ok && strings.Contains(exited.Tail, "address in use")
}
