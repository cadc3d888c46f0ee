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

// NamedEnv names the environment variable that holds named's path.
const NamedEnv = "NAMED_BIN"

const installScript = "scripts/dbops/ensure-tools.sh"

// Waits of a BIND's life.
const (
	bindReadyTimeout = 30 * time.Second
	bindStopGrace    = 10 * time.Second
	// portAttempts bounds the tries when another process takes the port
	// between choosing it and named's bind.
	portAttempts = 3
	// tsigSecretBytes is the length of a test key (RFC 8945 wants at least
	// the hash's output).
	tsigSecretBytes = 32
)

// BIND is a running BIND 9 named, primary of one zone that its TSIG key may
// update (RFC 2136), without recursion.
type BIND struct {
	// Addr is "127.0.0.1:port", UDP and TCP.
	Addr string
	// Zone is the zone's apex, without the final dot.
	Zone string
	// KeyName, Algorithm and Secret are the TSIG key that may update every
	// name of the zone (Secret in base64).
	KeyName, Algorithm, Secret string

	bin, dir, conf string
	proc           *childproc.Process
}

// StartBIND starts named for zone and waits until it answers the zone's SOA
// over UDP and TCP; it is stopped when the test ends. It fails the test
// when named cannot start; it never skips. named runs in the foreground
// (-g: its log is the child's output), as the user running the test, root
// included (no -u: it keeps that user).
func StartBIND(t testing.TB, zone string) *BIND {
	t.Helper()
	bin, err := NamedBinary()
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, tsigSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	b := &BIND{Zone: zone, KeyName: "fleet-manager-test.", Algorithm: "hmac-sha256",
		Secret: base64.StdEncoding.EncodeToString(secret), bin: bin, dir: t.TempDir()}
	b.conf = filepath.Join(b.dir, "named.conf")
	zoneFile := "$TTL 60\n@ IN SOA ns1." + zone + ". hostmaster." + zone + ". 1 60 60 3600 5\n@ IN NS ns1." + zone + ".\nns1 IN A 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(b.dir, "zone.db"), []byte(zoneFile), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	for attempt := 1; ; attempt++ {
		port, err := freeUDPAndTCPPort()
		if err != nil {
			t.Fatal(err)
		}
		b.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := os.WriteFile(b.conf, []byte(b.config(port)), 0o600); err != nil {
			t.Fatal(err)
		}
		err = b.run()
		if err == nil {
			break
		}
		b.proc.Stop(bindStopGrace)
		if !portTaken(err) || attempt == portAttempts {
			t.Fatalf("dnstest: %v", err)
		}
	}
	t.Logf("dnstest: named for %s at %s", zone, b.Addr)
	return b
}

// config is named.conf: everything in the test's folder, no control
// channel, no recursion, the zone updatable by the key.
func (b *BIND) config(port int) string {
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
`, b.dir, filepath.Join(b.dir, "named.pid"), filepath.Join(b.dir, "session.key"), port, b.KeyName, b.Algorithm, b.Secret, b.Zone)
}

// run starts named and waits until it answers.
func (b *BIND) run() error {
	var err error
	b.proc, err = childproc.Start(childproc.Options{Name: "named", Dir: b.dir, LogPath: filepath.Join(b.dir, "named.log")},
		b.bin, "-g", "-4", "-n", "1", "-c", b.conf)
	if err != nil {
		return err
	}
	return b.proc.WaitReady(bindReadyTimeout, func() error {
		for _, network := range []string{"udp", "tcp"} {
			if err := b.probe(network); err != nil {
				return err
			}
		}
		return nil
	})
}

// probe asks the zone's SOA and wants an authoritative answer.
func (b *BIND) probe(network string) error {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(b.Zone), dns.TypeSOA)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, _, err := (&dns.Client{Net: network, Timeout: time.Second}).ExchangeContext(ctx, q, b.Addr)
	if err != nil {
		return err
	}
	if resp.Rcode != dns.RcodeSuccess || !resp.Authoritative || len(resp.Answer) == 0 {
		return fmt.Errorf("SOA %s over %s: rcode %s, authoritative %t", b.Zone, network, dns.RcodeToString[resp.Rcode], resp.Authoritative)
	}
	return nil
}

// Stop stops named (a provider outage); the zone and its journal stay.
func (b *BIND) Stop() { b.proc.Stop(bindStopGrace) }

// Start starts a stopped named again on the same address, with the zone as
// it was (its journal holds the updates), and waits until it answers.
func (b *BIND) Start(t testing.TB) {
	t.Helper()
	if b.proc.Exited() == nil {
		t.Fatal("dnstest: named is running")
	}
	if err := b.run(); err != nil {
		t.Fatalf("dnstest: restarting named: %v", err)
	}
}

// LogTail returns the last n lines of named's log.
func (b *BIND) LogTail(n int) string { return b.proc.LogTail(n) }

// NamedBinary returns named: $NAMED_BIN, else the PATH's, else Debian's
// /usr/sbin/named (not on an ordinary user's PATH).
func NamedBinary() (string, error) {
	if bin := os.Getenv(NamedEnv); bin != "" {
		if info, err := os.Stat(bin); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("dnstest: %s=%s is no executable", NamedEnv, bin)
		}
		return bin, nil
	}
	if bin, err := exec.LookPath("named"); err == nil {
		return bin, nil
	}
	const debian = "/usr/sbin/named"
	if info, err := os.Stat(debian); err == nil && info.Mode()&0o111 != 0 {
		return debian, nil
	}
	return "", fmt.Errorf("dnstest: no named: run %s (it installs Debian's bind9 package; %s chooses another binary)", installScript, NamedEnv)
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

// portTaken reports whether named ended because its port was taken
// (named's words differ from childproc.PortTaken's).
func portTaken(err error) bool {
	exited, ok := errors.AsType[*childproc.ExitedError](err)
	return childproc.PortTaken(err) || ok && strings.Contains(exited.Tail, "address in use")
}
