package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/jsq"
	"github.com/floodgate-go/floodgate/middleware"
	"github.com/floodgate-go/floodgate/partner"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// drainPartnerMeta is the metadata key holding a benchmark message's
// partner key.
const drainPartnerMeta = "bench_partner"

var errDrainOpen = errors.New("bench: partner open")

// drainKeep, when set, is the floodgate variant's
// [retryqueue.PartnerDrainerConfig.KeepConsumers] (-1 keeps none), to
// compare the consumers kept between turns with none in one binary.
var drainKeep = flag.Int("drain.keep", 0, "BenchmarkDrain: floodgate's Drain.KeepConsumers (0: the default)")

// drainLanes and drainBulkhead, when set, are the floodgate variant's
// [retryqueue.PartnerDrainerConfig.MaxDraining] and each partner's
// bulkhead ([partner.PartnerConfig.MaxInFlight]), to compare them with the
// defaults in one binary.
var (
	drainLanes    = flag.Int("drain.lanes", 0, "BenchmarkDrain: floodgate's Drain.MaxDraining (0: the default)")
	drainBulkhead = flag.Int("drain.bulkhead", 0, "BenchmarkDrain: floodgate's Partner.MaxInFlight (0: the default)")
)

// drainRun is one variant's drain of a backlog: the delivery times by
// partner, recorded by the handler, and the wall and CPU time until every
// message was delivered and its ack confirmed.
type drainRun struct {
	start   time.Time
	mu      sync.Mutex
	times   map[string][]time.Duration
	total   atomic.Int64
	elapsed time.Duration
	cpu     time.Duration
	work    e2eWork // heap allocations and goroutines started, the server's included
	fetched uint64  // messages fetched, redeliveries included (wide only; 0: not counted)
}

func (r *drainRun) delivered(partnerKey string) {
	d := time.Since(r.start)
	r.mu.Lock()
	r.times[partnerKey] = append(r.times[partnerKey], d)
	r.mu.Unlock()
	r.total.Add(1)
}

// drainVariant drains a retry backlog of partners × each messages, stored
// by fill, to a no-op partner.
type drainVariant struct {
	name string
	run  func(b *testing.B, ctx context.Context, js jetstream.JetStream, prefix string, partners []string, each int) *drainRun
}

var drainVariants = []drainVariant{
	{"floodgate", drainFloodgate},
	{"plain", drainPlain},
}

// drainWideFlag adds the wide variant (see drainWide) to the round.
var drainWideFlag = flag.Bool("drain.wide", false, "BenchmarkDrain: also run the wide variant: one consumer for every partner of the service (a Drainer with AllPartners) through the per-partner middleware")

// variants returns the variants a round runs: drainVariants, and the wide
// one with -drain.wide.
func variants() []drainVariant {
	if *drainWideFlag {
		return append(slices.Clone(drainVariants), drainVariant{"wide", drainWide})
	}
	return drainVariants
}

// drainOnly, when set, runs one variant alone (to profile it).
var drainOnly = flag.String("drain.only", "", "BenchmarkDrain: run only this variant (floodgate, plain or, with -drain.wide, wide), to profile it")

// drainLatency, when set, is the mean time each delivery of the floodgate
// variant takes (uniform from half to 1.5 times it): a slow partner, whose
// drain its bulkhead bounds.
var drainLatency = flag.Duration("drain.latency", 0, "BenchmarkDrain: each floodgate delivery takes this long on average, uniform from half to 1.5 times it (a slow partner; run with -drain.only floodgate)")

// drainProfile, when set, writes a CPU profile of each variant's drain
// alone (not the filling of its backlog) to this path with the number of
// partners and the variant's name appended: path.p1.floodgate. The last
// round of a sub-benchmark overwrites the earlier ones'. Not with
// go test -cpuprofile (one profile at a time); the profiler's own
// allocations count in allocs/msg.
var drainProfile = flag.String("drain.cpuprofile", "", "BenchmarkDrain: write a CPU profile of each variant's drain, without the fill, to this path + \".p<partners>.<variant>\"")

// startDrainProfile starts the CPU profile of variant's drain of partners'
// backlogs if -drain.cpuprofile is set; the returned func stops it, and
// is also run at the sub-benchmark's end (a failed drain), once in all.
func startDrainProfile(b *testing.B, partners int, variant string) func() {
	if *drainProfile == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.p%d.%s", *drainProfile, partners, variant))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	})
	b.Cleanup(stop)
	return stop
}

// BenchmarkDrain drains a retry backlog of about b.N messages of 800 B,
// split equally among 1, 10 and 100 partners, to a no-op (fast) partner,
// through each variant in turn on one embedded JetStream server (file
// storage), the order rotated from round to round:
//
//   - floodgate: floodgate.New with its defaults (the per-partner drain,
//     [retryqueue.PartnerDrainer], through the guarding middleware), the
//     backlog diverted by [retryqueue.Queue.RouteTo] before the router
//     starts;
//   - plain: one durable pull consumer on a retry stream of the same kind
//     holding the same messages (also stored by RouteTo), read with
//     Messages (batch 256) by 64 workers that each deliver and DoubleAck:
//     the same ack guarantee, no breaker and no rate control;
//   - wide, with -drain.wide: one consumer for all partners (drainWide).
//
// It reports per variant: msg/s (aggregate, from start to the last ack
// confirmed), p-min-msg/s and p-med-msg/s (each partner's backlog over the
// time to its last delivery: the slowest and the median partner),
// cpu-ns/msg (getrusage, server included), allocs/msg (the process's heap
// allocations, server included, tiny ones aside (runtime/metrics'
// /gc/heap/allocs:objects): steadier than the times on a noisy machine), t80-ms (the time from start to
// the end of the first 100 ms window whose delivery rate reached 80 % of
// the steady rate: the median 100 ms window rate over the second half of
// the drain), steady-msg/s (that median window's rate: the steady state,
// without the start and the tail) and the ratios floodgate/plain of msg/s
// and of the steady rate (and wide/plain-steady with -drain.wide). One op
// is one message through every variant. Run it with -benchtime=200000x
// (see BENCHMARKS.md).
func BenchmarkDrain(b *testing.B) {
	for _, partners := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("partners=%d", partners), func(b *testing.B) {
			_, js := e2eServer(b)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			round := e2eRound.Add(1)
			each := max(1, b.N/partners)
			keys := make([]string, partners)
			for i := range keys {
				keys[i] = fmt.Sprintf("partner-%03d", i)
			}
			runs := map[string]*drainRun{}
			b.ResetTimer()
			vs := variants()
			for i := range vs {
				v := vs[(i+int(round))%len(vs)]
				if *drainOnly != "" && v.name != *drainOnly {
					runs[v.name] = &drainRun{elapsed: 1, times: map[string][]time.Duration{}}
					continue
				}
				prefix := fmt.Sprintf("drain_%d_%d_%s", os.Getpid(), round, v.name)
				runs[v.name] = v.run(b, ctx, js, prefix, keys, each)
			}
			b.StopTimer()
			total := float64(partners * each)
			for _, v := range vs {
				r := runs[v.name]
				pmin, pmed := r.partnerRates(each)
				b.ReportMetric(total/r.elapsed.Seconds(), v.name+"-msg/s")
				b.ReportMetric(pmin, v.name+"-p-min-msg/s")
				b.ReportMetric(pmed, v.name+"-p-med-msg/s")
				b.ReportMetric(float64(r.cpu.Nanoseconds())/total, v.name+"-cpu-ns/msg")
				b.ReportMetric(r.work.allocs/total, v.name+"-allocs/msg")
				b.ReportMetric(r.t80().Seconds()*1000, v.name+"-t80-ms")
				b.ReportMetric(r.steady(), v.name+"-steady-msg/s")
				if r.fetched > 0 {
					b.ReportMetric(float64(r.fetched)/total, v.name+"-fetched/msg")
				}
			}
			b.ReportMetric(runs["plain"].elapsed.Seconds()/runs["floodgate"].elapsed.Seconds(), "floodgate/plain-rate")
			if p := runs["plain"].steady(); p > 0 {
				b.ReportMetric(runs["floodgate"].steady()/p, "floodgate/plain-steady")
				if w, ok := runs["wide"]; ok {
					b.ReportMetric(w.steady()/p, "wide/plain-steady")
				}
			}
		})
	}
}

// partnerRates returns the slowest and the median partner's drain rate:
// each over the time to its last delivery.
func (r *drainRun) partnerRates(each int) (minRate, median float64) {
	var rates []float64
	for _, ts := range r.times {
		rates = append(rates, float64(each)/slices.Max(ts).Seconds())
	}
	if len(rates) == 0 {
		return 0, 0
	}
	slices.Sort(rates)
	return rates[0], rates[len(rates)/2]
}

// rateWindow is the window t80 and steady count deliveries in.
const rateWindow = 100 * time.Millisecond

// windows returns the deliveries per rateWindow from the start, and the
// median of them over the drain's second half (the last, partial window
// left out): the steady rate per window. It returns nil, 0 when the drain
// took less than two windows.
func (r *drainRun) windows() (counts []int, median int) {
	var all []time.Duration
	for _, ts := range r.times {
		all = append(all, ts...)
	}
	if len(all) == 0 {
		return nil, 0
	}
	n := int(slices.Max(all)/rateWindow) + 1
	if n < 2 {
		return nil, 0
	}
	counts = make([]int, n)
	for _, t := range all {
		counts[int(t/rateWindow)]++
	}
	steady := slices.Clone(counts[n/2 : max(n/2+1, n-1)])
	slices.Sort(steady)
	return counts, steady[len(steady)/2]
}

// steady returns the steady drain rate in messages per second: the median
// 100 ms window over the drain's second half (see windows); 0 for a drain
// shorter than two windows.
func (r *drainRun) steady() float64 {
	_, median := r.windows()
	return float64(median) / rateWindow.Seconds()
}

// t80 returns the end of the first 100 ms window whose delivery rate reached
// 80 % of the steady rate (the median window rate over the drain's second
// half); 0 when the drain took less than two windows.
func (r *drainRun) t80() time.Duration {
	counts, median := r.windows()
	if counts == nil {
		return 0
	}
	target := 0.8 * float64(median)
	for i, c := range counts {
		if float64(c) >= target {
			return time.Duration(i+1) * rateWindow
		}
	}
	return time.Duration(len(counts)) * rateWindow
}

// drainFill diverts each message of each partner into q (16 publishers).
func drainFill(b *testing.B, ctx context.Context, q *retryqueue.Queue, partners []string, each int) {
	body := make([]byte, e2eBody)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(partners)*each {
					return
				}
				key := partners[i%len(partners)]
				m := message.NewMessage(watermill.NewUUID(), body)
				m.Metadata.Set(drainPartnerMeta, key)
				if _, err := q.RouteTo(ctx, m, key, retryqueue.ReasonOpen, errDrainOpen); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// drainAwait waits until r has every message and the stream is empty (every
// ack confirmed; the retry stream has work-queue retention).
func drainAwait(b *testing.B, ctx context.Context, js jetstream.JetStream, stream string, r *drainRun, n int, name string) {
	for r.total.Load() < int64(n) || drainStored(ctx, js, stream) > 0 {
		if ctx.Err() != nil {
			b.Fatalf("%s: %d of %d messages delivered", name, r.total.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func drainStored(ctx context.Context, js jetstream.JetStream, stream string) uint64 {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 1
	}
	return info.State.Msgs
}

func drainQueueConfig(prefix string) retryqueue.Config {
	return retryqueue.Config{RetryTopic: prefix, DeadLetterTopic: prefix + "_dead", PayloadBucket: prefix + "_payload"}
}

func drainCleanup(b *testing.B, js jetstream.JetStream, prefix string) {
	b.Cleanup(func() {
		ctx := context.Background()
		_ = js.DeleteStream(ctx, prefix)
		_ = js.DeleteStream(ctx, prefix+"_dead")
		_ = js.DeleteObjectStore(ctx, prefix+"_payload")
	})
}

// drainFloodgate is the floodgate variant: floodgate.New with defaults.
func drainFloodgate(b *testing.B, ctx context.Context, js jetstream.JetStream, prefix string, partners []string, each int) *drainRun {
	b.StopTimer()
	drainCleanup(b, js, prefix)
	run := &drainRun{times: map[string][]time.Duration{}}
	live := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := floodgate.New(ctx, router, floodgate.Config{
		Name: prefix, Topic: prefix + "_live", Subscriber: live, JetStream: js,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get(drainPartnerMeta) },
		Deliver: func(m *message.Message) error {
			key, ok := retryqueue.DrainedPartner(m.Context(), m)
			if !ok {
				key = m.Metadata.Get(drainPartnerMeta)
			}
			if *drainLatency > 0 {
				time.Sleep(*drainLatency/2 + rand.N(*drainLatency)) // from half to 1.5 times
			}
			run.delivered(key)
			return nil
		},
		Queue:   drainQueueConfig(prefix),
		Partner: partner.PartnerConfig{MaxInFlight: *drainBulkhead},
		Drain:   retryqueue.PartnerDrainerConfig{KeepConsumers: *drainKeep, MaxDraining: *drainLanes},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	drainFill(b, ctx, f.Queue(), partners, each)
	b.StartTimer()
	stop := startDrainProfile(b, len(partners), "floodgate")
	run.start, run.cpu, run.work = time.Now(), cpuTime(), readWork()
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	drainAwait(b, ctx, js, prefix, run, len(partners)*each, "floodgate")
	run.elapsed, run.cpu, run.work = time.Since(run.start), cpuTime()-run.cpu, readWork().minus(run.work)
	stop()
	b.StopTimer()
	_ = router.Close()
	<-done
	b.StartTimer()
	return run
}

// drainQueue provisions and returns a retry queue of service under prefix,
// publishing on js's connection: the plain and wide variants' own.
func drainQueue(b *testing.B, ctx context.Context, js jetstream.JetStream, prefix, service string) *retryqueue.Queue {
	pub, err := jsq.NewPublisher(jsq.PublisherConfig{Conn: js.Conn()})
	if err != nil {
		b.Fatal(err)
	}
	qcfg := drainQueueConfig(prefix)
	qcfg.Publisher, qcfg.Service = pub, service
	if err := retryqueue.Provision(ctx, js, qcfg); err != nil {
		b.Fatal(err)
	}
	q, err := retryqueue.New(qcfg)
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// drainPlain is the plain variant: one pull consumer, 64 workers, DoubleAck.
func drainPlain(b *testing.B, ctx context.Context, js jetstream.JetStream, prefix string, partners []string, each int) *drainRun {
	b.StopTimer()
	drainCleanup(b, js, prefix)
	run := &drainRun{times: map[string][]time.Duration{}}
	q := drainQueue(b, ctx, js, prefix, "plain")
	drainFill(b, ctx, q, partners, each)
	b.StartTimer()
	stop := startDrainProfile(b, len(partners), "plain")
	run.start, run.cpu, run.work = time.Now(), cpuTime(), readWork()
	cons, err := js.CreateConsumer(ctx, prefix, jetstream.ConsumerConfig{
		Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan jetstream.Msg, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for m := range work {
				run.delivered(m.Headers().Get(drainPartnerMeta))
				if err := m.DoubleAck(ctx); err != nil {
					b.Error(err)
				}
			}
		})
	}
	go func() {
		defer close(work)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			work <- m
		}
	}()
	drainAwait(b, ctx, js, prefix, run, len(partners)*each, "plain")
	run.elapsed, run.cpu, run.work = time.Since(run.start), cpuTime()-run.cpu, readWork().minus(run.work)
	stop()
	b.StopTimer()
	it.Stop()
	wg.Wait()
	b.StartTimer()
	return run
}

// drainWide is the wide variant (-drain.wide): the drain BENCHMARKS.md's
// eighth step proposes for many partners in steady state, one consumer
// for every partner of the service (a [retryqueue.Drainer] with
// AllPartners, its defaults) through the guarding middleware of a partner
// registry (each message under its partner's breaker and bulkhead), its
// gate always open: what that design costs, without the moves of a
// partner between it and its own consumer that it would need. Its gate
// does not see the partners' bulkheads: a call a bulkhead refused would go
// back to the stream and be drained again, which wide-fetched/msg would
// show above 1.
func drainWide(b *testing.B, ctx context.Context, js jetstream.JetStream, prefix string, partners []string, each int) *drainRun {
	b.StopTimer()
	drainCleanup(b, js, prefix)
	run := &drainRun{times: map[string][]time.Duration{}}
	q := drainQueue(b, ctx, js, prefix, "wide")
	reg, err := partner.New(partner.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	guard, err := middleware.New(middleware.Config{Partners: reg, Queue: q,
		PartnerKey: func(m *message.Message) string { return m.Metadata.Get(drainPartnerMeta) }})
	if err != nil {
		b.Fatal(err)
	}
	h := guard(func(m *message.Message) ([]*message.Message, error) {
		key, ok := retryqueue.DrainedPartner(m.Context(), m)
		if !ok {
			key = m.Metadata.Get(drainPartnerMeta)
		}
		run.delivered(key)
		return nil, nil
	})
	drainFill(b, ctx, q, partners, each)
	d, err := retryqueue.NewDrainer(retryqueue.DrainerConfig{JetStream: js, Queue: q, AllPartners: true, Handler: h,
		Gate: retryqueue.GateFunc(func() int { return 1 << 20 })})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	stop := startDrainProfile(b, len(partners), "wide")
	run.start, run.cpu, run.work = time.Now(), cpuTime(), readWork()
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	drainAwait(b, ctx, js, prefix, run, len(partners)*each, "wide")
	run.elapsed, run.cpu, run.work = time.Since(run.start), cpuTime()-run.cpu, readWork().minus(run.work)
	run.fetched = d.Stats().Fetched
	stop()
	b.StopTimer()
	cancel()
	<-done
	b.StartTimer()
	return run
}
