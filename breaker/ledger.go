package breaker

// ledger tracks half-open admissions (probes and ramp or adaptive calls)
// until they are reported or expire. Ids grow forever; entries live in a ring
// indexed by id. When the breaker leaves half-open the entries are retired
// (liveFrom moves to next) but kept, so a late report is recognised once as
// stale and a repeated one ignored. All methods require the breaker's lock.
type ledger struct {
	buf      []entry
	head     uint64 // oldest entry kept
	next     uint64 // next id
	liveFrom uint64 // ids below are from an earlier period
	liveHead uint64 // no undone live entry below it
	open     int    // live entries not done
	lastAt   int64  // latest admission time, to keep starts monotonic
}

type entry struct {
	id     uint64
	start  int64
	aepoch uint32
	done   bool
}

func newLedger() ledger { return ledger{buf: make([]entry, 8)} }

func (l *ledger) mask() uint64 { return uint64(len(l.buf) - 1) }

func (l *ledger) add(start int64, aepoch uint32) uint64 {
	if l.next-l.head == uint64(len(l.buf)) {
		l.grow()
	}
	if start < l.lastAt {
		start = l.lastAt
	}
	l.lastAt = start
	id := l.next
	l.next++
	l.buf[id&l.mask()] = entry{id: id, start: start, aepoch: aepoch}
	l.open++
	return id
}

func (l *ledger) grow() {
	if l.head < l.liveFrom { // forget retired entries first
		l.head = l.liveFrom
		l.pop()
		if l.next-l.head < uint64(len(l.buf)) {
			return
		}
	}
	nb := make([]entry, 2*len(l.buf))
	m := uint64(len(nb) - 1)
	for id := l.head; id < l.next; id++ {
		nb[id&m] = l.buf[id&l.mask()]
	}
	l.buf = nb
}

func (l *ledger) pop() {
	for l.head < l.next && l.buf[l.head&l.mask()].done {
		l.head++
	}
}

// finish marks id done. It returns the entry, whether the id was found not
// done, and whether it is live (from the current period).
func (l *ledger) finish(id uint64) (entry, bool, bool) {
	if id < l.head || id >= l.next {
		return entry{}, false, false
	}
	e := &l.buf[id&l.mask()]
	if e.id != id || e.done {
		return entry{}, false, false
	}
	e.done = true
	live := id >= l.liveFrom
	if live {
		l.open--
	}
	got := *e
	l.pop()
	return got, true, live
}

// oldestLive returns the oldest live entry not done, or nil.
func (l *ledger) oldestLive() *entry {
	if l.liveHead < l.liveFrom {
		l.liveHead = l.liveFrom
	}
	if l.liveHead < l.head {
		l.liveHead = l.head
	}
	for ; l.liveHead < l.next; l.liveHead++ {
		if e := &l.buf[l.liveHead&l.mask()]; !e.done {
			return e
		}
	}
	return nil
}

// expireOne marks the oldest live entry done if it started at or before
// deadline, and returns it.
func (l *ledger) expireOne(deadline int64) (entry, bool) {
	e := l.oldestLive()
	if e == nil || e.start > deadline {
		return entry{}, false
	}
	e.done = true
	l.open--
	got := *e
	l.pop()
	return got, true
}

// retire ends the current period: its entries become stale.
func (l *ledger) retire() {
	l.liveFrom = l.next
	l.liveHead = l.next
	l.open = 0
}
