package breaker

// closedWindow holds the closed state's sliding window. Successes are not
// stored: they are counted by the slot table (see slots.go). Failures and slow
// calls are logged, under the breaker's lock, with their position in the
// period's sequence of counted outcomes (count-based window) or in time
// buckets (time-based window). The calls in a count-based window are
// min(total, WindowSize); a logged outcome is in it while its position is
// above total-WindowSize. All methods require the breaker's lock held.
type closedWindow struct {
	size  int64 // count-based size, 0 for time-based
	log   []logEntry
	head  int
	n     int
	fails int
	slows int

	// time-based
	width   int64 // bucket width, ns
	buckets []bucket
	cur     int64 // current bucket epoch

	// consecutive failures
	lastFailPos int64
	run         int
}

type logEntry struct {
	pos  int64
	fail bool
	slow bool
}

type bucket struct {
	epoch int64 // now/width; valid when >= 0
	start int64 // period total when the bucket began
	fails int
	slows int
}

func newClosedWindow(c *Config) closedWindow {
	w := closedWindow{}
	if c.WindowDuration > 0 {
		w.width = int64(c.WindowDuration) / int64(c.WindowBuckets)
		w.buckets = make([]bucket, c.WindowBuckets)
	} else {
		w.size = int64(c.WindowSize) // the log is allocated at the first failure or slow call
	}
	return w
}

// reset starts a new period at time now (total 0).
func (w *closedWindow) reset(now int64) {
	w.head, w.n, w.fails, w.slows = 0, 0, 0, 0
	w.lastFailPos, w.run = -1, 0
	if w.size == 0 {
		for i := range w.buckets {
			w.buckets[i] = bucket{epoch: -1}
		}
		w.cur = floorDiv(now, w.width)
		w.buckets[mod(w.cur, len(w.buckets))] = bucket{epoch: w.cur}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func mod(a int64, n int) int {
	m := int(a % int64(n))
	if m < 0 {
		m += n
	}
	return m
}

// rotate moves a time-based window to the bucket of now, where total is the
// period's count of outcomes so far. It reports the current epoch.
func (w *closedWindow) rotate(now, total int64) int64 {
	e := floorDiv(now, w.width)
	if e <= w.cur {
		return w.cur
	}
	b := int64(len(w.buckets))
	from := w.cur + 1
	if e-from >= b {
		from = e - b + 1
	}
	for k := from; k <= e; k++ {
		w.buckets[mod(k, len(w.buckets))] = bucket{epoch: k, start: total}
	}
	w.cur = e
	return e
}

// add logs a failure and/or slow call at position pos (1-based) in the
// current bucket.
func (w *closedWindow) add(pos int64, fail, slow bool) {
	if fail {
		if w.lastFailPos == pos-1 {
			w.run++
		} else {
			w.run = 1
		}
		w.lastFailPos = pos
	}
	if !fail && !slow {
		return
	}
	if w.size > 0 {
		if w.log == nil {
			w.log = make([]logEntry, w.size)
		}
		w.expire(pos)
		if w.n == len(w.log) { // cannot happen: entries expire after size positions
			w.pop()
		}
		w.log[(w.head+w.n)%len(w.log)] = logEntry{pos: pos, fail: fail, slow: slow}
		w.n++
	} else {
		bk := &w.buckets[mod(w.cur, len(w.buckets))]
		if fail {
			bk.fails++
		}
		if slow {
			bk.slows++
		}
	}
	if fail {
		w.fails++
	}
	if slow {
		w.slows++
	}
}

func (w *closedWindow) pop() {
	e := w.log[w.head]
	if e.fail {
		w.fails--
	}
	if e.slow {
		w.slows--
	}
	w.head = (w.head + 1) % len(w.log)
	w.n--
}

// expire drops logged outcomes that fell out of a count-based window.
func (w *closedWindow) expire(total int64) {
	for w.n > 0 && w.log[w.head].pos <= total-w.size {
		w.pop()
	}
}

// counts returns the calls, failures and slow calls in the window, where
// total is the period's count of outcomes (and, for a time-based window, the
// window has been rotated).
func (w *closedWindow) counts(total int64) (calls, fails, slows int) {
	if w.size > 0 {
		w.expire(total)
		return int(min(total, w.size)), w.fails, w.slows
	}
	oldest := w.cur - int64(len(w.buckets)) + 1
	base := int64(0)
	fails, slows = 0, 0
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bk.epoch < oldest || bk.epoch > w.cur {
			continue
		}
		fails += bk.fails
		slows += bk.slows
		if bk.epoch == oldest {
			base = bk.start
		}
	}
	w.fails, w.slows = fails, slows
	return int(total - base), fails, slows
}
