package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// Scan tuning: scanWorkers get requests in flight at once, each walking
// one chunk of the sequence range that holds about scanChunkMsgs
// messages; at most 2*scanWorkers chunks are read ahead of fn.
const (
	scanWorkers   = 16
	scanChunkMsgs = 256
)

// scanStream calls fn for every message of st stored when the scan starts
// (its cached info), in sequence order, from the goroutine that called it;
// subject ("" for any) filters by subject. It reads with message gets
// ("the first message at or after seq on subject"), scanWorkers requests
// in flight at once over consecutive chunks of the sequence range: no
// consumer is created, so it is safe on the work-queue retry stream, whose
// only consumers must be the drainers'. A message removed meanwhile is
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
	first, last := info.State.FirstSeq, info.State.LastSeq
	span := last - first + 1
	// Chunks hold about scanChunkMsgs messages: a sparse stream (a
	// work-queue stream with old messages far apart) gets fewer, wider
	// chunks, each jumped across with one request.
	width := max(scanChunkMsgs, span/max(info.State.Msgs, 1)*scanChunkMsgs)
	chunks := (span + width - 1) / width

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		msgs []storedMsg
		err  error
	}
	results := make([]chan result, chunks)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	ahead := make(chan struct{}, 2*scanWorkers) // chunks read ahead of fn
	next := make(chan uint64)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	go func() { // hands out chunk indexes, in order, at most len(ahead) ahead
		defer close(next)
		for i := range chunks {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range min(uint64(scanWorkers), chunks) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				lo := first + i*width
				hi := min(lo+width-1, last)
				msgs, err := readChunk(ctx, st, subject, lo, hi)
				results[i] <- result{msgs, err}
			}
		}()
	}
	for i := range chunks {
		var r result
		select {
		case r = <-results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return fmt.Errorf("stream %s: %w", info.Config.Name, r.err)
		}
		for _, m := range r.msgs {
			if err := fn(m); err != nil {
				return err
			}
		}
		if bar != nil {
			bar.add(uint64(len(r.msgs)))
		}
		<-ahead
	}
	return nil
}

// readChunk returns the messages on subject with sequences in [lo, hi].
func readChunk(ctx context.Context, st jetstream.Stream, subject string, lo, hi uint64) ([]storedMsg, error) {
	var out []storedMsg
	for seq := lo; seq <= hi; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil // nothing at or after seq any more
		}
		if err != nil {
			return out, fmt.Errorf("read message %d: %w", seq, err)
		}
		if raw.Sequence > hi {
			return out, nil
		}
		out = append(out, storedMsg{seq: raw.Sequence, subject: raw.Subject, header: raw.Header, data: raw.Data, at: raw.Time})
		seq = raw.Sequence + 1
	}
	return out, nil
}
