package agent

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/private"
)

// maxReportedFailures is the most entry failures one heartbeat carries, as
// the private API allows.
const maxReportedFailures = 1000

// Reasons of the entry failures the agent finds itself, before the hub
// answers; a failure the hub answers carries the hub's reason.
const (
	ReasonObjectInvalid = "ObjectInvalid"
	ReasonRefusedByHub  = "RefusedByHub"
)

// entryError is what is wrong with one entry's own objects: the same
// objects fail the same way on every try, and only their owner is concerned.
type entryError struct {
	reason string
	err    error
}

func (e *entryError) Error() string { return e.err.Error() }
func (e *entryError) Unwrap() error { return e.err }

// invalidEntry marks err as the fault of the entry's objects.
func invalidEntry(reason string, err error) error { return &entryError{reason: reason, err: err} }

// entryFailure reports whether err, the outcome of applying one entry, is
// that entry's failure alone, and if so, as the fleet manager gets it: the
// hub's reason and message when the hub answered for one of its objects
// (invalid, too large, forbidden, or a server-side apply it could not make,
// which it answers with 500), KindNotServed for a kind the hub has no CRD
// for, the agent's own when the objects could not even be read. An answer
// that may pass later (throttling, a timeout) fails the entry all the same:
// failed entries are tried again. Errors without an answer (the hub or the
// network down) concern the whole pass, which is then retried and not
// acknowledged.
func entryFailure(err error) (private.EntryFailure, bool) {
	var (
		entry  *entryError
		noKind *meta.NoKindMatchError
		status apierrors.APIStatus
	)
	var reason string
	switch {
	case errors.As(err, &entry):
		reason = entry.reason
	case errors.As(err, &noKind):
		reason = ReasonKindNotServed
	case errors.As(err, &status):
		if reason = string(status.Status().Reason); reason == "" {
			reason = ReasonRefusedByHub
		}
	default:
		return private.EntryFailure{}, false
	}
	f := fleet.SanitizeFailure(fleet.DeliveryFailure{Reason: reason, Message: err.Error()})
	return private.EntryFailure{Reason: f.Reason, Message: f.Message}, true
}

// entryFailures collects the failures of one pass's entries.
type entryFailures struct {
	items []private.EntryFailure
	// transient are the errors that fail the whole pass.
	transient []error
}

// add records the outcome of one entry, named by set (its id goes into the
// failure).
func (f *entryFailures) add(err error, set func(*private.EntryFailure)) {
	if err == nil {
		return
	}
	failure, ok := entryFailure(err)
	if !ok {
		f.transient = append(f.transient, err)
		return
	}
	set(&failure)
	f.items = append(f.items, failure)
}

// failureOf returns the failure the fleet manager sent for an entry it could
// not render, as an error of that entry.
func failureOf(f *private.EntryFailure) error {
	if f == nil {
		return nil
	}
	return invalidEntry(f.Reason, errors.New(f.Message))
}
