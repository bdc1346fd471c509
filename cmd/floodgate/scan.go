package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// storedMsg is what the scans need of a stored message.
type storedMsg struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
	at      time.Time
}

// errStreamNotFound marks a missing stream.
var errStreamNotFound = errors.New("not found")

// requireStream returns stream, or, when it does not exist, an error
// wrapping errStreamNotFound that names it and the flag that set it: the
// one message of every command on a missing stream.
func requireStream(ctx context.Context, js jetstream.JetStream, stream, flag string) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s %w (check %s; floodgate creates it when it first starts with that name)", stream, errStreamNotFound, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return st, nil
}

// scanBatch is how many messages one fetch of a scan's ordered consumer
// asks for.
const scanBatch = 1000

// scanStream calls fn for every message of st stored when the scan starts
// (its cached info), in sequence order; subject ("" for any) filters by
// subject. A limits stream (the dead letters) is read with an ephemeral
// ordered consumer in fetches of scanBatch messages (the server removes
// it once idle). A work-queue stream (the retry backlog) must not get a
// consumer beside the drainers' (the server refuses overlapping ones), so
// it is read with one message get per message ("the first message at or
// after seq on subject"), which is slower. A message removed meanwhile is
// skipped. bar, if not nil, counts the messages read.
func scanStream(ctx context.Context, st jetstream.Stream, subject string, bar *progressBar, fn func(storedMsg) error) error {
	info := st.CachedInfo()
	if info.State.Msgs == 0 {
		return nil
	}
	if subject == "" {
		subject = ">"
		if len(info.Config.Subjects) == 1 {
			subject = info.Config.Subjects[0]
		}
	}
	if bar != nil {
		defer bar.done()
		fn = func(fn func(storedMsg) error) func(storedMsg) error {
			return func(m storedMsg) error { bar.add(1); return fn(m) }
		}(fn)
	}
	var err error
	if info.Config.Retention == jetstream.WorkQueuePolicy {
		err = getEach(ctx, st, subject, info.State.FirstSeq, info.State.LastSeq, fn)
	} else {
		err = fetchAll(ctx, st, subject, info.State.LastSeq, fn)
	}
	if err != nil && !errors.Is(err, errStopScan) {
		return fmt.Errorf("stream %s: %w", info.Config.Name, err)
	}
	return err
}

// errStopScan, returned by a scan's fn, ends the scan; scanStream returns
// it as it is.
var errStopScan = errors.New("scan stopped")

// fetchAll reads the messages on subject up to sequence last with an
// ordered consumer.
func fetchAll(ctx context.Context, st jetstream.Stream, subject string, last uint64, fn func(storedMsg) error) error {
	// The first message on subject, with one get: none means nothing to
	// scan (a fetch would wait out its timeout).
	first, err := st.GetMsg(ctx, st.CachedInfo().State.FirstSeq, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read first message: %w", err)
	}
	if first.Sequence > last {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first.Sequence})
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	seen := first.Sequence - 1 // the last sequence handed to fn
	empty := 0                 // empty fetches in a row
	for {
		batch, err := cons.Fetch(scanBatch, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		n := 0
		done := false
		for jm := range batch.Messages() {
			n++
			if done {
				continue // let the batch run out
			}
			md, err := jm.Metadata()
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			if md.Sequence.Stream > last {
				done = true
				continue
			}
			if err := fn(storedMsg{seq: md.Sequence.Stream, subject: jm.Subject(), header: jm.Headers(), data: jm.Data(), at: md.Timestamp}); err != nil {
				return err
			}
			seen = md.Sequence.Stream
			done = md.Sequence.Stream == last || md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("fetch: %w", err)
		}
		if done {
			return nil
		}
		if n > 0 {
			empty = 0
			continue
		}
		// An empty fetch ends the scan only when nothing up to last is
		// left (deleted meanwhile); otherwise the server was slow: fetch
		// again, a few times, then say the scan is incomplete.
		next, err := st.GetMsg(ctx, seen+1, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && next.Sequence > last {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read message after %d: %w", seen, err)
		}
		if empty++; empty == 3 {
			return fmt.Errorf("scan incomplete: %d empty fetches with message %d of %d still stored", empty, next.Sequence, last)
		}
	}
}

// getEach reads the messages on subject with sequences in [lo, hi], one
// message get each.
func getEach(ctx context.Context, st jetstream.Stream, subject string, lo, hi uint64, fn func(storedMsg) error) error {
	for seq := lo; seq <= hi; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // nothing at or after seq any more
		}
		if err != nil {
			return fmt.Errorf("read message %d: %w", seq, err)
		}
		if raw.Sequence > hi {
			return nil
		}
		if err := fn(storedMsg{seq: raw.Sequence, subject: raw.Subject, header: raw.Header, data: raw.Data, at: raw.Time}); err != nil {
			return err
		}
		seq = raw.Sequence + 1
	}
	return nil
}
