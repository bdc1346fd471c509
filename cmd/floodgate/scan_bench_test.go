package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/internal/natstest"
	"github.com/floodgate-go/floodgate/retryqueue"
)

// EnvScanBench sizes BenchmarkScan's stream; unset, the benchmark is
// skipped (it is manual, not run in CI). See BENCHMARKS.md.
const EnvScanBench = "FLOODGATE_SCAN_BENCH_MSGS"

// BenchmarkScan reads a dead-letter stream of $FLOODGATE_SCAN_BENCH_MSGS
// messages of about 1 KiB (a payload and floodgate's headers) as backlog
// and deadletters list do: "batched" is scanStream (an ordered consumer
// fetching 1000 at a time), "one-by-one" one message get per message (the
// previous scan, still used on the work-queue retry stream). It reports
// msgs/s; one op is one full scan.
func BenchmarkScan(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv(EnvScanBench))
	if n <= 0 {
		b.Skipf("set %s to the stream size (e.g. 200000) to run this manual benchmark", EnvScanBench)
	}
	ctx := context.Background()
	url := natstest.URL(b)
	nc := natstest.Conn(b, url)
	js := natstest.JetStream(b, nc)
	dead := natstest.Name(b, "dead")
	natstest.DeleteStreams(b, js, dead)
	st, err := js.CreateStream(ctx, retryqueue.DeadLetterStreamConfig(dead))
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("ISA*00*          *00*          *ZZ*SENDER~", 20))[:800]
	for i := range n {
		m := nats.NewMsg(retryqueue.RouteSubject(dead, "orders/as2", fmt.Sprintf("p%d", i%50)))
		m.Header.Set("_watermill_message_uuid", fmt.Sprintf("uuid-%08d", i))
		m.Header.Set(retryqueue.MetaOriginalTopic, "edi_orders")
		m.Header.Set(retryqueue.MetaDeadReason, retryqueue.DeadReasonMaxAttempts)
		m.Header.Set(retryqueue.MetaLastError, "HTTP 503 Service Unavailable")
		m.Header.Set(retryqueue.MetaAttempt, "5")
		m.Data = payload
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if i%2000 == 1999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	if st, err = js.Stream(ctx, dead); err != nil || st.CachedInfo().State.Msgs != uint64(n) {
		b.Fatalf("stream holds %d messages, want %d (%v)", st.CachedInfo().State.Msgs, n, err)
	}
	b.Logf("stream %s: %d messages, %d bytes", dead, n, st.CachedInfo().State.Bytes)
	scans := map[string]func(jetstream.Stream) (int, error){
		"batched": func(st jetstream.Stream) (int, error) {
			k := 0
			err := scanStream(ctx, st, "", nil, func(storedMsg) error { k++; return nil })
			return k, err
		},
		"one-by-one": func(st jetstream.Stream) (int, error) {
			info := st.CachedInfo()
			k := 0
			err := getEach(ctx, st, info.Config.Subjects[0], info.State.FirstSeq, info.State.LastSeq, func(storedMsg) error { k++; return nil })
			return k, err
		},
	}
	for _, name := range []string{"batched", "one-by-one"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				k, err := scans[name](st)
				if err != nil || k != n {
					b.Fatalf("scanned %d of %d: %v", k, n, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
