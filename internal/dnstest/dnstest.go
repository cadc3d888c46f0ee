// Package dnstest runs DNS providers for tests: a real BIND 9 named (Debian's
// bind9, which scripts/dbops/ensure-tools.sh installs), primary of a zone
// that a TSIG key may update by RFC 2136, and Route53Server, a server of the
// Amazon Route53 API's contract as AWS documents it (API version 2013-04-01,
// REST with XML, Signature Version 4) with an authoritative DNS server of
// its hosted zone.
//
// Route53 itself cannot be reached from the machines the tests run on, and
// moto (the AWS emulator, which issue 21 names) cannot be installed: PyPI is
// refused there. Route53Server stands in for both; every test that uses it
// says so.
//
// Knot, a second RFC 2136 implementation, is not run: BIND is the reference
// implementation of RFC 2136 and TSIG.
package dnstest
