package middleware

import (
	"strings"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/floodgate-go/floodgate/deliver"
)

// Parking. A handler error holding a [deliver.ParkError] says the partner
// cannot be delivered to until an operator changes its configuration (an
// AS2 partner's certificate expired, or not the pinned one). The
// middleware then parks the partner: it forces the partner's breaker open
// with [breaker.Breaker.ForceOpenReason] (in per-partner mode the
// partner's own breaker, so other partners keep delivering), the reason
// being the error's text, and diverts the message for failure
// ([ReasonParked]). Every later message of the partner is refused by the
// open breaker and diverted ("open"): nothing is lost, nothing is sent.
// The call is reported neutral: the partner answered, and its health is
// not in question.
//
// The reason is what "floodgate status" shows (text and JSON, as
// "forced open: ..."), when the breaker is in a fleet (partner.Config.Fleet
// or floodgate.Config.Fleet); without one it is in the transition given to
// the breaker's listeners (and the log). To un-park, fix the partner's
// configuration, then run "floodgate close" (or "reset") for the partner,
// or call ForceClose (Reset) on its breaker: the drain then delivers the
// backlog.

// maxParkReason bounds the reason recorded with the forced open, in bytes.
const maxParkReason = 400

// park forces the breaker that admitted c open with the reason of c's
// ParkError, and logs it.
func (g *guard) park(msg *message.Message, c *call) {
	pe := deliver.AsPark(c.err)
	b := g.cfg.Breaker
	if p := c.lease.Partner(); p != nil {
		b = p.Breaker()
	}
	reason := parkReason(pe)
	if b != nil {
		b.ForceOpenReason(reason)
	}
	g.cfg.Logger.Error("floodgate: partner parked (breaker forced open) until an operator runs floodgate close or reset; its messages wait in the retry stream", pe,
		watermill.LogFields{"message_uuid": msg.UUID, "partner": c.token})
}

// parkReason is the one-line reason of pe, without control characters,
// at most maxParkReason bytes.
func parkReason(pe *deliver.ParkError) string {
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, pe.Error())
	if len(s) > maxParkReason {
		s = s[:maxParkReason]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}
