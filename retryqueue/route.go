package retryqueue

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/floodgate-go/floodgate/partner"
)

// DefaultPartner is the partner key of a [Queue] whose [Config.Partner] is
// empty: a service that delivers to one partner needs no name for it.
const DefaultPartner = "default"

// Route metadata keys: every diverted message and dead letter carries its
// route. The queue sets them from its configuration (or the route a
// drained message was fetched from), never from the message: a live
// message that arrives with them has them overwritten.
const (
	// MetaService is the route's service name ([Config.Service], or the
	// name derived from [Config.Source] and [Config.Handler]).
	MetaService = "floodgate_service"
	// MetaPartner is the route's partner key as given, when it can travel
	// as a NATS header value (valid UTF-8, no control characters, no
	// leading or trailing space); absent otherwise, and then
	// [partner.Decode] of [MetaPartnerToken] gives it back unless the token
	// is hashed.
	MetaPartner = "floodgate_partner"
	// MetaPartnerBase64 is the route's partner key in unpadded base64url
	// (RFC 4648 §5), set instead of [MetaPartner] when the key cannot
	// travel as a header value, so that every key, even a hashed token's,
	// can be recovered from a diverted message. [PartnerKey] reads either.
	MetaPartnerBase64 = "floodgate_partner_b64"
	// MetaPartnerToken is [partner.Token] of the route's partner key: the
	// last token of the message's subject.
	MetaPartnerToken = "floodgate_partner_token"
)

// DeadReasonRoute: a drained message's route metadata did not match the
// route its drainer drains (the subject it was stored under). It is never
// delivered. Isolation itself comes from the consumer's filter subject;
// this check is a second line of defence.
const DeadReasonRoute = "route-mismatch"

// ServiceName is the service name a [Config] without Service derives from
// its Source and Handler: source + "/" + handler. A topic holds no '/'
// ([jsq.ValidateTopic]), so distinct (source, handler) pairs give distinct
// names.
func ServiceName(source, handler string) string { return source + "/" + handler }

// RouteSubject is the subject of a route under topic (a retry or
// dead-letter stream name): topic.<service token>.<partner token>, with
// both tokens from [partner.Token]. Distinct (service, partner) pairs get
// distinct subjects, and no key can add a token or a wildcard.
func RouteSubject(topic, service, partnerKey string) string {
	return topic + "." + partner.Token(service) + "." + partner.Token(partnerKey)
}

// ServiceSubjects is the filter subject of every route of service under
// topic: topic.<service token>.>.
func ServiceSubjects(topic, service string) string {
	return topic + "." + partner.Token(service) + ".>"
}

// ConsumerName is the default durable consumer name of the [Drainer] of
// the route (service, partnerKey): "floodgate_drainer~" + the service token
// + "~" + the partner token. "~" is in no token, so distinct routes get
// distinct names. Pass it to [Depth] to read a route's backlog.
func ConsumerName(service, partnerKey string) string {
	return consumerPrefix + partner.Token(service) + "~" + partner.Token(partnerKey)
}

// consumerPrefix starts every default drainer consumer name.
const consumerPrefix = "floodgate_drainer~"

// StreamSubjects is the filter subject of every route under topic: the
// subjects of the streams [Provision] creates.
func StreamSubjects(topic string) string { return topic + ".>" }

// route is the identity a message is diverted or dead-lettered under.
type route struct {
	service      string // service token
	partnerToken string // partner token
	partnerKey   string // the raw key; "" with known false when only the token is known
	known        bool
}

func (q *Queue) routeOf(partnerKey string) route {
	return route{service: q.service, partnerToken: partner.Token(partnerKey), partnerKey: partnerKey, known: true}
}

// subject is r's subject under topic.
func (r route) subject(topic string) string { return topic + "." + r.service + "." + r.partnerToken }

// stamp sets r's route metadata on m, replacing what m carried.
func (q *Queue) stamp(m *message.Message, r route) {
	m.Metadata.Set(MetaService, q.cfg.Service)
	m.Metadata.Set(MetaPartnerToken, r.partnerToken)
	delete(m.Metadata, MetaPartner)
	delete(m.Metadata, MetaPartnerBase64)
	if !r.known {
		return
	}
	if headerSafe(r.partnerKey) {
		m.Metadata.Set(MetaPartner, r.partnerKey)
	} else {
		m.Metadata.Set(MetaPartnerBase64, base64.RawURLEncoding.EncodeToString([]byte(r.partnerKey)))
	}
}

// PartnerKey returns the partner key a diverted message or dead letter
// carries in its route metadata ([MetaPartner], else [MetaPartnerBase64],
// else [partner.Decode] of [MetaPartnerToken]), and whether it has one
// that matches its [MetaPartnerToken]. The metadata is untrusted: a key
// that does not give the token is reported as absent.
func PartnerKey(m *message.Message) (string, bool) {
	tok, ok := m.Metadata[MetaPartnerToken]
	if !ok {
		return "", false
	}
	k, ok := m.Metadata[MetaPartner]
	if !ok {
		b, has := m.Metadata[MetaPartnerBase64]
		if !has {
			k, err := partner.Decode(tok)
			return k, err == nil
		}
		raw, err := base64.RawURLEncoding.DecodeString(b)
		if err != nil {
			return "", false
		}
		k = string(raw)
	}
	return k, partner.Verify(k, tok) == nil
}

// DrainedPartner returns the partner key of the route a drained message
// was fetched from, when ctx is the context the [Drainer] handed msg to its
// handler with; ok is false for live messages. A drained message never
// changes route: the caller guards it with this partner's breaker, not
// one chosen from the message's payload or metadata.
func DrainedPartner(ctx context.Context, msg *message.Message) (key string, ok bool) {
	s := slotFor(ctx, msg)
	if s == nil || !s.route.known {
		return "", false
	}
	return s.route.partnerKey, true
}

// resolve returns the route msg goes to: the route a drainer fetched it
// from when ctx is its drained context (a drained message never changes
// route), else partnerKey's.
func (q *Queue) resolve(ctx context.Context, msg *message.Message, partnerKey string) route {
	if s := slotFor(ctx, msg); s != nil && s.route.service != "" {
		return s.route
	}
	return q.routeOf(partnerKey)
}

// routeFromSubject parses topic.<service>.<partner> into a route, and
// reports false for any other subject (the bare topic of the previous
// layout, or more or fewer tokens).
func routeFromSubject(topic, subject string) (route, bool) {
	rest, ok := strings.CutPrefix(subject, topic+".")
	if !ok {
		return route{}, false
	}
	svc, p, ok := strings.Cut(rest, ".")
	if !ok || svc == "" || p == "" || strings.Contains(p, ".") {
		return route{}, false
	}
	r := route{service: svc, partnerToken: p}
	if k, err := partner.Decode(p); err == nil {
		r.partnerKey, r.known = k, true
	}
	return r, true
}

// checkRoute reports why m, stored under subject route r, does not carry r
// in its metadata ("" if it does). service is a service name whose token
// is r.service (the drainer's own), so that its messages skip computing
// the token.
func checkRoute(m *message.Message, r route, service string) string {
	svc, ok := m.Metadata[MetaService]
	switch {
	case !ok:
		return fmt.Sprintf("%s missing on a message stored under service token %q", MetaService, r.service)
	case svc != service && partner.Token(svc) != r.service:
		return fmt.Sprintf("%s %q (token %q) differs from the stream subject's service token %q", MetaService, svc, partner.Token(svc), r.service)
	case m.Metadata.Get(MetaPartnerToken) != r.partnerToken:
		return fmt.Sprintf("%s %q differs from the stream subject's partner token %q", MetaPartnerToken, m.Metadata.Get(MetaPartnerToken), r.partnerToken)
	}
	if k, ok := m.Metadata[MetaPartner]; ok {
		if err := partner.Verify(k, r.partnerToken); err != nil {
			return fmt.Sprintf("%s does not give the partner token %q: %v", MetaPartner, r.partnerToken, err)
		}
	}
	if b, ok := m.Metadata[MetaPartnerBase64]; ok {
		raw, err := base64.RawURLEncoding.DecodeString(b)
		if err != nil {
			return fmt.Sprintf("%s is not unpadded base64url: %v", MetaPartnerBase64, err)
		}
		if err := partner.Verify(string(raw), r.partnerToken); err != nil {
			return fmt.Sprintf("%s does not give the partner token %q: %v", MetaPartnerBase64, r.partnerToken, err)
		}
	}
	return ""
}

// withKey fills in r's partner key from m's route metadata, once
// [checkRoute] has passed.
func withKey(m *message.Message, r route) route {
	if !r.known {
		if k, ok := PartnerKey(m); ok {
			r.partnerKey, r.known = k, true
		}
	}
	return r
}

// ValidService reports whether s is a valid service name
// ([Config.Service]): non-empty printable UTF-8 (no C0 or C1 control
// character, no DEL) without leading or trailing space, so that it travels
// unchanged as a NATS header value. Other packages naming a service (a
// receipt store) use it to apply the same rule. Safe for concurrent use.
func ValidService(s string) bool { return headerSafe(s) }

// headerSafe reports whether s travels unchanged as a NATS header value.
func headerSafe(s string) bool {
	if s == "" || !utf8.ValidString(s) || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
