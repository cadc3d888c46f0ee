package fleet

import (
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxDeliveredDepth is the deepest nesting of a hub object the fleet manager
// puts into a desired set. A desired set wraps each object in a few levels of
// its own, and every JSON decoder on the way (the agent's, the hub's) stops
// at 10,000 levels: an entry deeper than this bound is sent without its
// objects and with a failure, so it can never make the whole set undecodable.
const MaxDeliveredDepth = 1000

// Limits of a delivery failure's reason and message, as the private API has them.
const (
	MaxFailureReason  = 128
	MaxFailureMessage = 1024
)

// Reasons of the delivery failures the fleet manager finds itself while it
// renders a hub's desired set, and the one standing in for a hub's reason
// that is not a condition reason; the others are the hub's own.
const (
	ReasonObjectTooDeep         = "ObjectTooDeep"
	ReasonObjectUnreadable      = "ObjectUnreadable"
	ReasonCredentialsUnreadable = "CredentialsUnreadable"
	ReasonApplyRefused          = "ApplyRefused"
)

// DeliveryFailure is why one entry of a hub's desired set (a registration's
// or a policy's objects) is not on the hub: the hub refused them, or the
// fleet manager could not render them. It fails that entry's owner only.
type DeliveryFailure struct {
	// RegistrationID or PolicyID names the entry; exactly one is set.
	RegistrationID string
	PolicyID       string
	Reason         string
	Message        string
}

// PolicyDeliveryFailure is why one hub does not hold a policy it should.
type PolicyDeliveryFailure struct {
	HubID   string    `json:"hub_id"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// failureReasonPattern is what Kubernetes accepts as a condition reason.
var failureReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// SanitizeFailure makes a delivery failure safe to store and show: a reason
// that is not a condition reason becomes ApplyRefused, and the message loses
// control characters and invalid UTF-8 and is cut to MaxFailureMessage bytes.
func SanitizeFailure(f DeliveryFailure) DeliveryFailure {
	if !failureReasonPattern.MatchString(f.Reason) || len(f.Reason) > MaxFailureReason {
		f.Reason = ReasonApplyRefused
	}
	f.Message = sanitizeText(f.Message, MaxFailureMessage)
	return f
}

// sanitizeText keeps printable text (a control character becomes a space)
// and cuts it at a rune boundary to at most limit bytes, "..." included.
func sanitizeText(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= limit {
		return s
	}
	cut := limit - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// JSONDepth returns the deepest nesting of objects and arrays in the JSON
// text b, without decoding it (so without any decoder's depth limit).
func JSONDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
