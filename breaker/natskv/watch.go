package natskv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/floodgate-go/floodgate/breaker"
)

// closedCheck is how often a running bucket watch checks that its
// connection is still open (a closed connection ends no KV watch by
// itself).
const closedCheck = 250 * time.Millisecond

// Stats counts the KV watches of a bucket in this process. Stores made by
// [New] with the same JetStream and bucket share them.
type Stats struct {
	// WatchesOpened counts the KV watches opened on the bucket: one while
	// any breaker watches, and one more after each watch that failed or
	// stopped when its last breaker left.
	WatchesOpened uint64
	// Watching is the number of watches of breaker names ([Store.Watch])
	// running now, all served by the one KV watch.
	Watching int
	// Running reports whether the bucket's KV watch is running.
	Running bool
}

// hubKey identifies a bucket in this process.
type hubKey struct {
	js     jetstream.JetStream
	bucket string
}

var watchHubs struct {
	sync.Mutex
	m map[hubKey]*watchHub
}

// watchHub is the one KV watch of a bucket in this process, on the state
// keys of every breaker ("*.state" and "*.*.state"), demultiplexed by key
// to the breakers' watches: one goroutine and one KV watch (an ordered
// consumer) per bucket, whatever the number of breakers. It starts on the
// first Store.Watch and stops when the last one ends.
type watchHub struct {
	js jetstream.JetStream
	kv jetstream.KeyValue

	mu     sync.Mutex
	subs   map[string]map[*watchSub]struct{} // by state key
	n      int
	w      jetstream.KeyWatcher // nil when not running
	stop   chan struct{}
	opened uint64
}

// watchSub is one Store.Watch: fn is called in revision order, under mu.
type watchSub struct {
	key  string
	fn   func(breaker.SharedState, uint64, error)
	mu   sync.Mutex
	last uint64
	over bool
}

func hubFor(js jetstream.JetStream, kv jetstream.KeyValue) *watchHub {
	k := hubKey{js: js, bucket: kv.Bucket()}
	watchHubs.Lock()
	defer watchHubs.Unlock()
	if h := watchHubs.m[k]; h != nil {
		return h
	}
	if watchHubs.m == nil {
		watchHubs.m = map[hubKey]*watchHub{}
	}
	h := &watchHub{js: js, kv: kv, subs: map[string]map[*watchSub]struct{}{}}
	watchHubs.m[k] = h
	return h
}

// deliver calls s.fn with an update newer than the last it delivered.
func (s *watchSub) deliver(st breaker.SharedState, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over || rev <= s.last {
		return
	}
	s.last = rev
	s.fn(st, rev, nil)
}

// fail ends s with err, once.
func (s *watchSub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return
	}
	s.over = true
	s.fn(breaker.SharedState{}, 0, err)
}

// add registers s and starts the bucket's watch if it is not running.
func (h *watchHub) add(s *watchSub) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		// Updates only: each breaker reads its current state itself (Watch
		// does, after the watch started), so a restart does not replay
		// every key of the bucket.
		w, err := h.kv.WatchFiltered(context.Background(), []string{"*.state", "*.*.state"}, jetstream.UpdatesOnly())
		if err != nil {
			return err
		}
		h.w, h.stop = w, make(chan struct{})
		h.opened++
		go h.run(w, h.stop)
	}
	m := h.subs[s.key]
	if m == nil {
		m = map[*watchSub]struct{}{}
		h.subs[s.key] = m
	}
	m[s] = struct{}{}
	h.n++
	return nil
}

// remove unregisters s; the last one stops the bucket's watch.
func (h *watchHub) remove(s *watchSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[s.key]
	if _, ok := m[s]; !ok {
		return
	}
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.key)
	}
	h.n--
	if h.n == 0 && h.w != nil {
		_ = h.w.Stop()
		close(h.stop)
		h.w, h.stop = nil, nil
	}
}

// run demultiplexes w's updates until stop is closed, or w fails: then
// every registered watch ends with an error and the next Watch starts a
// new KV watch.
func (h *watchHub) run(w jetstream.KeyWatcher, stop chan struct{}) {
	tick := time.NewTicker(closedCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if h.js.Conn().IsClosed() {
				h.fail(w, errors.New("natskv: watch: connection closed"))
				return
			}
		case e, ok := <-w.Updates():
			if !ok {
				h.fail(w, errors.New("natskv: watch ended"))
				return
			}
			if e == nil {
				continue
			}
			st, err := decode(e)
			if err != nil {
				continue // a corrupt write is not applied; Load reports it
			}
			h.mu.Lock()
			subs := make([]*watchSub, 0, len(h.subs[e.Key()]))
			for s := range h.subs[e.Key()] {
				subs = append(subs, s)
			}
			h.mu.Unlock()
			for _, s := range subs {
				s.deliver(st, e.Revision())
			}
		}
	}
}

// fail ends every watch registered on w, unless w was stopped meanwhile.
func (h *watchHub) fail(w jetstream.KeyWatcher, err error) {
	h.mu.Lock()
	if h.w != w {
		h.mu.Unlock()
		return
	}
	_ = w.Stop()
	h.w, h.stop = nil, nil
	var ended []*watchSub
	for _, m := range h.subs {
		for s := range m {
			ended = append(ended, s)
		}
	}
	h.subs, h.n = map[string]map[*watchSub]struct{}{}, 0
	h.mu.Unlock()
	for _, s := range ended {
		s.fail(fmt.Errorf("%w (%s)", err, s.key))
	}
}

func (h *watchHub) stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{WatchesOpened: h.opened, Watching: h.n, Running: h.w != nil}
}

// Watch implements [breaker.Store]. Every watch of the bucket in this
// process (of every Store on the same JetStream and bucket) is served by
// one KV watch on the bucket's state keys and one goroutine: a breaker's
// watch costs an entry in a map, not a consumer or a goroutine. Watch
// registers fn, starts the bucket's watch if it is not running, then reads
// name's current state and delivers it if there is one. fn is called in
// revision order, never concurrently with itself, from the bucket watch's
// goroutine (or Watch's caller for the current state): it must not block,
// or it holds up every breaker's updates. If the bucket's watch fails
// (the connection closed), every registered fn is called once with the
// error and the next Watch starts a new one. The watch of name ends when
// ctx is done.
func (s *Store) Watch(ctx context.Context, name string, fn func(breaker.SharedState, uint64, error)) error {
	key, err := stateKey(name)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sub := &watchSub{key: key, fn: fn}
	if err := s.hub.add(sub); err != nil {
		return fmt.Errorf("natskv: watch %s: %w", key, err)
	}
	context.AfterFunc(ctx, func() {
		sub.mu.Lock()
		sub.over = true
		sub.mu.Unlock()
		s.hub.remove(sub)
	})
	st, rev, err := s.Load(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil // ended meanwhile
		}
		s.hub.remove(sub)
		return err
	}
	if rev > 0 {
		sub.deliver(st, rev)
	}
	return nil
}

// Stats returns the counts of the bucket's watch in this process.
func (s *Store) Stats() Stats { return s.hub.stats() }
