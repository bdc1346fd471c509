package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// reasonOther is the -reason of a dead letter whose reason is none of
// deadReasons: one the caller gave Queue.DeadLetter (the metrics' "other").
const reasonOther = "other"

// deadReasons are the dead-letter reasons the queue and the middleware
// set, from their constants, in the order of the metrics' reason label.
var deadReasons = []string{retryqueue.DeadReasonPermanent, retryqueue.DeadReasonMalformed,
	retryqueue.DeadReasonMaxAttempts, retryqueue.DeadReasonMaxAge, retryqueue.DeadReasonTooLarge, middleware.DeadReasonMaxDeliver,
	retryqueue.DeadReasonMDNTimeout, retryqueue.DeadReasonRoute, middleware.DeadReasonNoPartner, middleware.DeadReasonPartnerKey, middleware.DeadReasonPartnerConfig,
	middleware.DeadReasonMetadataTooLarge}

// reasonValues lists the values -reason accepts, for help and errors.
func reasonValues() string { return strings.Join(append(slices.Clone(deadReasons), reasonOther), ", ") }

// reasonCategory maps a dead letter's reason to its category as the
// metrics' reason label does: the text before a ':' ("too-large:
// max-attempts" is too-large), or "other" for a reason of the caller's own.
func reasonCategory(r string) string {
	cat, _, _ := strings.Cut(r, ":")
	cat = strings.TrimSpace(cat)
	if slices.Contains(deadReasons, cat) {
		return cat
	}
	return reasonOther
}

// reasonFlag is a -reason flag: one of deadReasons or "other"; "" selects
// any reason.
type reasonFlag string

func (r *reasonFlag) String() string { return string(*r) }

func (r *reasonFlag) Set(v string) error {
	if v != reasonOther && !slices.Contains(deadReasons, v) {
		return fmt.Errorf("unknown reason %q, allowed %s", v, reasonValues())
	}
	*r = reasonFlag(v)
	return nil
}

// match reports whether a dead letter with reason reason is selected.
func (r reasonFlag) match(reason string) bool { return r == "" || reasonCategory(reason) == string(r) }

// matcher returns match, or nil when r selects any reason.
func (r reasonFlag) matcher() func(string) bool {
	if r == "" {
		return nil
	}
	return r.match
}

const reasonUsage = "only dead letters of this `reason` category (the metrics' reason label: a \"too-large: max-attempts\" reason is too-large; other: a reason of the caller's own): "
