// Package dnstest runs DNS providers for tests: real RFC 2136 primaries,
// BIND 9's named (Debian's bind9) and Knot DNS's knotd (Debian's knot), each
// serving a zone that a TSIG key may update (scripts/dbops/ensure-tools.sh
// installs both); and Route53Server, a server of the Amazon Route53 API's
// contract as AWS documents it (API version 2013-04-01, REST with XML,
// Signature Version 4) with an authoritative DNS server of its hosted zone.
//
// Route53 itself cannot be reached from the machines the tests run on, and
// moto (the AWS emulator, which issue 21 names) cannot be installed: PyPI is
// refused there. Route53Server stands in for both; every test that uses it
// says so.
package dnstest
