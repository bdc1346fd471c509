package middleware_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/sony/gobreaker"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// benchQueue is a queue on a real connection; the delivered path never
// publishes, so no stream is needed.
func benchQueue(b *testing.B) *retryqueue.Queue {
	b.Helper()
	nc := natstest.Conn(b, natstest.URL(b))
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: nc})
	if err != nil {
		b.Fatal(err)
	}
	q, err := retryqueue.New(retryqueue.Config{Publisher: pub, Service: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// noop is the handler of the benchmarks: it succeeds at once.
func noop(*message.Message) ([]*message.Message, error) { return nil, nil }

// benchDelivered runs the messages, in turn, through mw wrapping noop: on
// the benchmark's goroutine, or (fresh) each on a goroutine of its own, as
// Watermill's router runs them, so a handler whose stack outgrows a new
// goroutine's pays for the growth on every message.
//
// Besides sec/op it reports cpu-ns/op, the process's CPU time (getrusage,
// all threads: the garbage collector's too) per message: on a shared
// machine, time the process waits for a core inflates sec/op but not this.
func benchDelivered(b *testing.B, mw message.HandlerMiddleware, msgs []*message.Message, fresh bool) {
	h := mw(noop)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
	i := 0
	if !fresh {
		for b.Loop() {
			if _, err := h(msgs[i%len(msgs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		return
	}
	errs := make(chan error)
	for b.Loop() {
		msg := msgs[i%len(msgs)]
		go asRouter(h, msg, errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// routerSink keeps asRouter's frame from being optimized away.
var routerSink string

// asRouter calls h as Watermill's router does, on the goroutine it was
// started on (go h.handleMessage(msg, handler)), from a frame the size of
// (*handler).handleMessage's (184 bytes in v1.5.1, with a deferred
// recover), so the stack below the middleware is as deep as under the
// router; it sends h's error to errs.
//
//go:noinline
func asRouter(h message.HandlerFunc, msg *message.Message, errs chan<- error) {
	var fields [7]string
	fields[len(msg.UUID)%7] = msg.UUID
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
		errs <- err
	}()
	_, err = h(msg)
	routerSink = fields[len(msg.Payload)%7]
}

// benchMiddlewares are the middlewares BenchmarkDelivered compares, each
// with the messages it runs (a partner key in metadata, for per-partner
// mode). floodgate's run with the wall clock, an OnEvent that keeps the
// event's partner token (so the event escapes as it would to metrics), and
// the default Timeout or none.
func benchMiddlewares(b *testing.B) []struct {
	name string
	mw   message.HandlerMiddleware
	msgs []*message.Message
} {
	q := benchQueue(b)
	var sink string
	b.Cleanup(func() { _ = sink })
	onEvent := func(ev middleware.Event) { sink = ev.Partner }
	msgs := []*message.Message{message.NewMessage("m1", []byte("x"))}
	var pmsgs []*message.Message
	for _, k := range []string{"ACME", "globex.example", "initech"} {
		m := message.NewMessage("m-"+k, []byte("x"))
		m.Metadata.Set("to", k)
		pmsgs = append(pmsgs, m)
	}
	cb, err := breaker.New(breaker.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cb.Stop)
	reg, err := partner.New(partner.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(reg.Close)
	for _, m := range pmsgs { // the partners exist before the timer
		if _, err := reg.Get(m.Metadata.Get("to")); err != nil {
			b.Fatal(err)
		}
	}
	key := func(m *message.Message) string { return m.Metadata.Get("to") }
	must := func(mw message.HandlerMiddleware, err error) message.HandlerMiddleware {
		if err != nil {
			b.Fatal(err)
		}
		return mw
	}
	return []struct {
		name string
		mw   message.HandlerMiddleware
		msgs []*message.Message
	}{
		{"watermill-cb", wmw.NewCircuitBreaker(gobreaker.Settings{Name: "bench"}).Middleware, msgs},
		{"single", must(middleware.New(middleware.Config{Breaker: cb, Queue: q, OnEvent: onEvent})), msgs},
		{"partners", must(middleware.New(middleware.Config{Partners: reg, PartnerKey: key, Queue: q, OnEvent: onEvent})), pmsgs},
		{"single-notimeout", must(middleware.New(middleware.Config{Breaker: cb, Queue: q, OnEvent: onEvent, Timeout: middleware.NoTimeout})), msgs},
		{"partners-notimeout", must(middleware.New(middleware.Config{Partners: reg, PartnerKey: key, Queue: q, OnEvent: onEvent, Timeout: middleware.NoTimeout})), pmsgs},
	}
}

// BenchmarkDelivered is the middleware's closed path: a message admitted,
// delivered and reported, side by side with Watermill's CircuitBreaker
// middleware (sony/gobreaker) around the same no-op handler. mw=single is
// Config.Breaker, mw=partners Config.Partners (a partner.Registry, the key
// from metadata, over 3 partners that exist), both at the default Timeout;
// the -notimeout ones the same with Timeout NoTimeout.
// go=same runs each message on the benchmark's goroutine, go=fresh on a
// new goroutine per message, as Watermill's router does. Compare with
//
//	benchstat -col /mw -row /go new.txt
func BenchmarkDelivered(b *testing.B) {
	for _, fresh := range []bool{false, true} {
		g := "same"
		if fresh {
			g = "fresh"
		}
		for _, c := range benchMiddlewares(b) {
			b.Run("go="+g+"/mw="+c.name, func(b *testing.B) { benchDelivered(b, c.mw, c.msgs, fresh) })
		}
	}
}
