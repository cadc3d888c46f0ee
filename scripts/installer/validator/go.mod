// This go.mod only fences the validator off from Fleet Manager's module, so
// that `go build ./...` and `go vet ./...` there never compile it: it needs
// github.com/openshift/installer's own replace directives, which apply only
// inside that module. scripts/installer/build-validator.sh copies main.go
// into a writable copy of the installer's module and builds it there.
module fleet-manager/installer-validator

go 1.22
