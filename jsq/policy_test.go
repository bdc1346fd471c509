package jsq_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
)

// mismatch returns err as a *jsq.ConfigMismatchError naming field, failing
// the test otherwise.
func mismatch(t *testing.T, err error, field string, values ...string) *jsq.ConfigMismatchError {
	t.Helper()
	var me *jsq.ConfigMismatchError
	if !errors.Is(err, jsq.ErrConfigMismatch) || !errors.As(err, &me) {
		t.Fatalf("err = %v, want a *jsq.ConfigMismatchError", err)
	}
	if !slices.ContainsFunc(me.Fields, func(f jsq.FieldMismatch) bool { return f.Field == field }) {
		t.Errorf("fields %+v do not name %s", me.Fields, field)
	}
	for _, v := range append([]string{field}, values...) {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not contain %q", err, v)
		}
	}
	return me
}

// Regression (issue 12): Subscribe called CreateOrUpdateConsumer, which
// silently replaced the operator's MaxDeliver, AckWait, MaxAckPending and
// deliver policy. An existing consumer that differs in a field jsq sets is
// now refused with an error naming the field and both values, and left as
// it was.
func TestExistingConsumerThatDiffersIsRefusedUnchanged(t *testing.T) {
	cases := []struct {
		field  string
		mod    func(*jetstream.ConsumerConfig)
		values []string // both values, as the error shows them
		read   func(jetstream.ConsumerConfig) any
		want   any // the operator's value, read back
	}{
		{"MaxDeliver", func(c *jetstream.ConsumerConfig) { c.MaxDeliver = 5 }, []string{"is 5", "want -1 (unlimited)"},
			func(c jetstream.ConsumerConfig) any { return c.MaxDeliver }, 5},
		{"AckWait", func(c *jetstream.ConsumerConfig) { c.AckWait = time.Minute }, []string{"is 1m0s", "want 30s"},
			func(c jetstream.ConsumerConfig) any { return c.AckWait }, time.Minute},
		{"MaxAckPending", func(c *jetstream.ConsumerConfig) { c.MaxAckPending = 7 }, []string{"is 7", "want 1000"},
			func(c jetstream.ConsumerConfig) any { return c.MaxAckPending }, 7},
		{"DeliverPolicy", func(c *jetstream.ConsumerConfig) { c.DeliverPolicy = jetstream.DeliverNewPolicy }, []string{"is new", "want all"},
			func(c jetstream.ConsumerConfig) any { return c.DeliverPolicy }, jetstream.DeliverNewPolicy},
		{"AckPolicy", func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckAllPolicy }, []string{"is AckAll", "want AckExplicit"},
			func(c jetstream.ConsumerConfig) any { return c.AckPolicy }, jetstream.AckAllPolicy},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			e := setup(t)
			scfg := jsq.SubscriberConfig{URL: e.url}
			existing := scfg.ConsumerConfig(e.topic)
			tc.mod(&existing)
			if _, err := e.js.CreateConsumer(ctx(t), e.topic, existing); err != nil {
				t.Fatal(err)
			}
			sub := e.subscriber(t, scfg)
			_, err := sub.Subscribe(ctx(t), e.topic)
			me := mismatch(t, err, tc.field, tc.values...)
			if me.Stream != e.topic || me.Consumer != existing.Durable || len(me.Fields) != 1 {
				t.Errorf("error %+v, want one field on consumer %s of %s", me, existing.Durable, e.topic)
			}
			if got := tc.read(e.consumerInfo(t, existing.Durable).Config); got != tc.want {
				t.Errorf("%s read back = %v, want the operator's %v, unchanged", tc.field, got, tc.want)
			}
		})
	}
}

// An existing consumer equal to jsq's in the fields jsq sets, created by an
// operator who left those fields to the server's defaults and set others
// jsq does not touch, is bound as it is: messages flow and the operator's
// fields stay. Before issue 12's fix CreateOrUpdateConsumer cleared the
// operator's Description and InactiveThreshold.
func TestExistingEqualConsumerIsBoundAsIs(t *testing.T) {
	e := setup(t)
	name := jsq.DefaultConsumerName(e.topic)
	// AckWait, MaxDeliver, MaxAckPending left zero: the server fills in
	// 30s, -1 and 1000, jsq's defaults.
	if _, err := e.js.CreateConsumer(ctx(t), e.topic, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Description: "the operator's", MaxRequestBatch: 10,
	}); err != nil {
		t.Fatal(err)
	}
	sub := e.subscriber(t, jsq.SubscriberConfig{})
	got := make(chan string, 1)
	runRouter(t, time.Second, e.topic, sub, func(m *message.Message) error {
		got <- m.UUID
		return nil
	})
	if err := e.pub.Publish(e.topic, message.NewMessage("m1", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "m1" {
			t.Errorf("got %s, want m1", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no message through the bound consumer")
	}
	c := e.consumerInfo(t, name).Config
	if c.Description != "the operator's" || c.MaxRequestBatch != 10 {
		t.Errorf("consumer changed: description %q, MaxRequestBatch %d; want the operator's, 10", c.Description, c.MaxRequestBatch)
	}
}

// An absent consumer is created with [jsq.SubscriberConfig.ConsumerConfig];
// a finite MaxDeliver with the explicit option is created as asked and an
// existing consumer with it is bound.
func TestAbsentConsumerIsCreated(t *testing.T) {
	for _, md := range []int{0, 3} {
		t.Run(fmt.Sprint("MaxDeliver=", md), func(t *testing.T) {
			e := setup(t)
			cfg := jsq.SubscriberConfig{AckWait: 20 * time.Second, MaxAckPending: 9, MaxDeliver: md, AllowFiniteMaxDeliver: md > 0}
			for range 2 { // create, then bind the same one again
				sub := e.subscriber(t, cfg)
				if _, err := sub.Subscribe(ctx(t), e.topic); err != nil {
					t.Fatal(err)
				}
				_ = sub.Close()
			}
			c := e.consumerInfo(t, jsq.DefaultConsumerName(e.topic)).Config
			want := md // asked for
			if md == 0 {
				want = -1 // the default: unlimited
			}
			if c.AckWait != 20*time.Second || c.MaxAckPending != 9 || c.MaxDeliver != want ||
				c.DeliverPolicy != jetstream.DeliverAllPolicy || c.AckPolicy != jetstream.AckExplicitPolicy {
				t.Errorf("created %+v", c)
			}
		})
	}
}

// Regression (issue 12): an operator's consumer with a finite MaxDeliver is
// bound only when the subscriber asks for that MaxDeliver with
// AllowFiniteMaxDeliver; asking for it without the option is a config error.
func TestFiniteMaxDeliverNeedsTheOption(t *testing.T) {
	e := setup(t)
	cfg := jsq.SubscriberConfig{URL: e.url, MaxDeliver: 4}
	if _, err := jsq.NewSubscriber(cfg); !errors.Is(err, jsq.ErrInvalidConfig) || !strings.Contains(err.Error(), "AllowFiniteMaxDeliver") {
		t.Fatalf("NewSubscriber: %v, want an invalid config naming AllowFiniteMaxDeliver", err)
	}
	existing := cfg.ConsumerConfig(e.topic)
	if _, err := e.js.CreateConsumer(ctx(t), e.topic, existing); err != nil {
		t.Fatal(err)
	}
	_, err := e.subscriber(t, jsq.SubscriberConfig{}).Subscribe(ctx(t), e.topic)
	mismatch(t, err, "MaxDeliver", "is 4", "want -1 (unlimited)")
	cfg.AllowFiniteMaxDeliver = true
	if _, err := e.subscriber(t, cfg).Subscribe(ctx(t), e.topic); err != nil {
		t.Fatalf("with the option: %v", err)
	}
	if md := e.consumerInfo(t, existing.Durable).Config.MaxDeliver; md != 4 {
		t.Errorf("MaxDeliver read back %d, want 4", md)
	}
}

// Regression (issue 12): EnsureStream used an existing stream whatever its
// configuration. It now refuses one that differs in a field jsq sets, and
// leaves it unchanged; Subscribe refuses it too.
func TestExistingStreamThatDiffersIsRefusedUnchanged(t *testing.T) {
	cases := []struct {
		field  string
		mod    func(*jetstream.StreamConfig)
		values []string
		check  func(jetstream.StreamConfig) bool
	}{
		{"Storage", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, []string{"is Memory", "want File"},
			func(c jetstream.StreamConfig) bool { return c.Storage == jetstream.MemoryStorage }},
		{"Subjects", func(c *jetstream.StreamConfig) { c.Subjects = append(c.Subjects, c.Name+"_other") }, []string{"_other]", "want ["},
			func(c jetstream.StreamConfig) bool { return len(c.Subjects) == 2 }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			url := natstest.URL(t)
			js := natstest.JetStream(t, natstest.Conn(t, url))
			topic := natstest.Name(t, "src")
			natstest.DeleteStreams(t, js, topic)
			sc := jsq.StreamConfig(topic)
			tc.mod(&sc)
			if _, err := js.CreateStream(ctx(t), sc); err != nil {
				t.Fatal(err)
			}
			_, err := jsq.EnsureStream(ctx(t), js, topic)
			mismatch(t, err, tc.field, tc.values...)
			sub, err := jsq.NewSubscriber(jsq.SubscriberConfig{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			_, err = sub.Subscribe(ctx(t), topic)
			mismatch(t, err, tc.field)
			st, err := js.Stream(ctx(t), topic)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config; !tc.check(got) {
				t.Errorf("stream changed: %+v", got)
			}
			if _, err := st.Consumer(ctx(t), jsq.DefaultConsumerName(topic)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Errorf("consumer on the refused stream: %v, want none created", err)
			}
		})
	}
}

// An existing stream equal in the fields jsq compares is used as it is: the
// operator's other fields stay (a work-queue source stream, as the fleet
// tests use, included), and one created without subjects (the server
// defaults them to its name) is equal.
func TestExistingEqualStreamIsUsedAsIs(t *testing.T) {
	url := natstest.URL(t)
	js := natstest.JetStream(t, natstest.Conn(t, url))
	topic := natstest.Name(t, "src")
	natstest.DeleteStreams(t, js, topic)
	if _, err := js.CreateStream(ctx(t), jetstream.StreamConfig{Name: topic, Description: "the operator's", MaxMsgSize: 1 << 16, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	st, err := jsq.EnsureStream(ctx(t), js, topic)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.Description != "the operator's" || c.MaxMsgSize != 1<<16 || c.Retention != jetstream.WorkQueuePolicy {
		t.Errorf("stream changed: %+v", c)
	}
}
