package permissions_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/floodgate-go/floodgate/breaker/natskv"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
	"github.com/floodgate-go/floodgate/permissions"
	"github.com/floodgate-go/floodgate/retryqueue"
)

var (
	cfgA = permissions.Config{Role: permissions.RoleService, Service: "orders/as2", RetryTopic: "retry_a", DeadLetterTopic: "dead_a", FleetBucket: "brk_a"}
	cfgB = permissions.Config{Role: permissions.RoleService, Service: "orders/as2-b", RetryTopic: "retry_b", DeadLetterTopic: "dead_b", FleetBucket: "brk_b"}
)

func generate(t *testing.T, c permissions.Config) permissions.Set {
	t.Helper()
	s, err := permissions.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range append(append([]string{}, s.Publish.Allow...), s.Subscribe.Allow...) {
		if !server.IsValidSubject(x) {
			t.Errorf("%q is not a valid subject", x)
		}
	}
	return s
}

// Two services' sets share no subject but the account info: neither can
// publish or subscribe where the other may. Nor does service B's set share
// one with A's read-only or read-write operator.
func TestServicesDisjoint(t *testing.T) {
	roA, rwA := cfgA, cfgA
	roA.Role, rwA.Role = permissions.RoleReadOnly, permissions.RoleReadWrite
	b := generate(t, cfgB)
	for _, c := range []permissions.Config{cfgA, roA, rwA} {
		a := generate(t, c)
		for _, pa := range [][]string{a.Publish.Allow, a.Subscribe.Allow} {
			for _, x := range pa {
				for _, y := range slices.Concat(b.Publish.Allow, b.Subscribe.Allow) {
					if x != "$JS.API.INFO" && server.SubjectsCollide(x, y) {
						t.Errorf("A's %s %q overlaps B's %q", c.Role, x, y)
					}
				}
			}
		}
	}
}

// allowed reports whether some allow entry matches subject.
func allowed(allow []string, subject string) bool {
	for _, f := range allow {
		if server.SubjectMatchesFilter(subject, f) {
			return true
		}
	}
	return false
}

// The read-only operator reads but never removes, publishes or writes a
// key; the read-write one does.
func TestOperatorRoles(t *testing.T) {
	ro := permissions.Config{Role: permissions.RoleReadOnly, RetryTopic: "retry_a", DeadLetterTopic: "dead_a", FleetBucket: "brk_a"}
	rw := ro
	rw.Role = permissions.RoleReadWrite
	r, w := generate(t, ro), generate(t, rw)
	writes := []string{
		retryqueue.RouteSubject("retry_a", "orders/as2", "acme"), retryqueue.RouteSubject("dead_a", "orders/as2", "acme"),
		"$JS.ACK.retry_a.c.1.1.1.1.1", "$JS.API.STREAM.PURGE.dead_a", "$JS.API.STREAM.PURGE.retry_a",
		"$JS.API.STREAM.MSG.DELETE.dead_a", "$JS.API.CONSUMER.MSG.NEXT.retry_a." + retryqueue.ConsumerName("orders/as2", "acme"),
		"$KV.brk_a.orders=2Fas2.acme.state", "$JS.API.STREAM.UPDATE.retry_a",
	}
	for _, s := range writes {
		if allowed(r.Publish.Allow, s) {
			t.Errorf("ro may publish to %q", s)
		}
		if !allowed(w.Publish.Allow, s) {
			t.Errorf("rw may not publish to %q", s)
		}
	}
	// Reads of messages (retry messages, dead letters, stored payloads:
	// the partners' documents) by sequence, direct get or consumer.
	const obj = "OBJ_dead_a_payloads"
	reads := []string{
		"$JS.API.STREAM.MSG.GET.retry_a", "$JS.API.DIRECT.GET.retry_a", "$JS.API.DIRECT.GET.retry_a.retry_a.x.y",
		"$JS.API.STREAM.MSG.GET.dead_a", "$JS.API.DIRECT.GET.dead_a", "$JS.API.CONSUMER.CREATE.dead_a.x.dead_a.>",
		"$JS.API.CONSUMER.CREATE.dead_a.x", "$JS.API.CONSUMER.MSG.NEXT.dead_a.x",
		"$JS.API.STREAM.MSG.GET." + obj, "$JS.API.DIRECT.GET." + obj + ".$O.dead_a_payloads.M.eA",
		"$JS.API.CONSUMER.CREATE." + obj + ".x.$O.dead_a_payloads.C.y", "$JS.API.CONSUMER.MSG.NEXT." + obj + ".x",
		"$JS.API.CONSUMER.CREATE.retry_a.x",
	}
	for _, s := range reads {
		if allowed(r.Publish.Allow, s) {
			t.Errorf("ro may read messages with %q", s)
		}
		if !allowed(w.Publish.Allow, s) {
			t.Errorf("rw may not read messages with %q", s)
		}
	}
	// Counts and the breakers' states (operational state, no content).
	for _, s := range []string{
		"$JS.API.STREAM.INFO.retry_a", "$JS.API.STREAM.INFO.dead_a", "$JS.API.STREAM.INFO." + obj,
		"$JS.API.CONSUMER.INFO.retry_a.x", "$JS.API.CONSUMER.NAMES.retry_a", "$JS.API.CONSUMER.LIST.dead_a",
		"$JS.API.STREAM.INFO.KV_brk_a", "$JS.API.DIRECT.GET.KV_brk_a.$KV.brk_a.x.y.state",
	} {
		if !allowed(r.Publish.Allow, s) {
			t.Errorf("ro may not read %q", s)
		}
	}
	if !slices.Equal(r.Subscribe.Allow, []string{"_INBOX.>"}) {
		t.Errorf("ro subscribe %q", r.Subscribe.Allow)
	}
}

// A service role naming a shared default stream or bucket is refused, the
// error naming the field.
func TestGenerateRefusesSharedDefaults(t *testing.T) {
	for field, c := range map[string]permissions.Config{
		"RetryTopic":      {RetryTopic: retryqueue.DefaultRetryTopic},
		"DeadLetterTopic": {DeadLetterTopic: retryqueue.DefaultDeadLetterTopic},
		"PayloadBucket":   {PayloadBucket: retryqueue.DefaultDeadLetterTopic + "_payloads"},
		"FleetBucket":     {FleetBucket: natskv.DefaultBucket},
		"ReceiptBucket":   {ReceiptBucket: asyncmdn.DefaultBucket},
	} {
		c.Role, c.Service = permissions.RoleService, "s"
		if c.RetryTopic == "" {
			c.RetryTopic = "retry_s"
		}
		if c.DeadLetterTopic == "" {
			c.DeadLetterTopic = "dead_s"
		}
		_, err := permissions.Generate(c)
		if !errors.Is(err, permissions.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("%s: error %v, want ErrInvalidConfig naming %s", field, err, field)
		}
	}
	ok := permissions.Config{Role: permissions.RoleService, Service: "s", RetryTopic: "retry_s", DeadLetterTopic: "dead_s", PayloadBucket: "pay_s", FleetBucket: "brk_s", ReceiptBucket: "mdn_s"}
	if _, err := permissions.Generate(ok); err != nil {
		t.Errorf("own streams and buckets: %v", err)
	}
}

func TestGenerateRefuses(t *testing.T) {
	for _, c := range []permissions.Config{
		{},
		{Role: "admin"},
		{Role: permissions.RoleService, RetryTopic: "r", DeadLetterTopic: "d"},                                        // no service
		{Role: permissions.RoleService, Service: "s"},                                                                 // shared defaults
		{Role: permissions.RoleService, Service: "s", RetryTopic: retryqueue.DefaultRetryTopic, DeadLetterTopic: "d"}, // shared retry stream
		{Role: permissions.RoleReadOnly, FleetBucket: "a.b"},
		{Role: permissions.RoleService, Service: "s", RetryTopic: "r.>", DeadLetterTopic: "d"}, // a wildcard would widen the grant
		{Role: permissions.RoleReadOnly, DeadLetterTopic: "*"},
	} {
		if _, err := permissions.Generate(c); !errors.Is(err, permissions.ErrInvalidConfig) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig", c, err)
		}
	}
}

// The nats-conf form parses as nats-server configuration into the same
// lists.
func TestNATSConfParses(t *testing.T) {
	s := generate(t, cfgA)
	m, err := conf.Parse("u: {" + s.NATSConf() + "}")
	if err != nil {
		t.Fatal(err)
	}
	p := m["u"].(map[string]any)["permissions"].(map[string]any)
	list := func(section string) []string {
		var out []string
		for _, x := range p[section].(map[string]any)["allow"].([]any) {
			out = append(out, x.(string))
		}
		return out
	}
	if got := list("publish"); !slices.Equal(got, s.Publish.Allow) {
		t.Errorf("publish allow parsed as %q, want %q", got, s.Publish.Allow)
	}
	if got := list("subscribe"); !slices.Equal(got, s.Subscribe.Allow) {
		t.Errorf("subscribe allow parsed as %q, want %q", got, s.Subscribe.Allow)
	}
}
