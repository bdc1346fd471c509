package retryqueue

import "time"

// canonicalHistory reports whether v is a [MetaHistory] value in the form
// floodgate writes it (encodeEntry: fixed key order, plain ASCII strings,
// no white space) whose every value decodes, so that [History] parses it
// without error and [Queue.Malformed] need not run encoding/json's
// reflection on it. false says nothing: the caller parses v with History.
func canonicalHistory(v string) bool {
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return false
	}
	h := historyScan{b: v[:len(v)-1], i: 1}
	for {
		if !h.entry() {
			return false
		}
		if h.i == len(h.b) {
			return true
		}
		if !h.lit(",") {
			return false
		}
	}
}

// historyScan reads b from i.
type historyScan struct {
	b string
	i int
}

// lit consumes s if b continues with it.
func (h *historyScan) lit(s string) bool {
	if len(h.b)-h.i < len(s) || h.b[h.i:h.i+len(s)] != s {
		return false
	}
	h.i += len(s)
	return true
}

// entry consumes one object as encodeEntry writes it.
func (h *historyScan) entry() bool {
	if !h.lit(`{"at":`) {
		return false
	}
	start := h.i
	if !h.str() {
		return false
	}
	var t time.Time // decoded exactly as encoding/json decodes it
	var buf [64]byte
	if h.i-start > len(buf) || t.UnmarshalJSON(append(buf[:0], h.b[start:h.i]...)) != nil {
		return false
	}
	if !h.lit(`,"event":`) || !h.str() {
		return false
	}
	if h.lit(`,"reason":`) && !h.str() {
		return false
	}
	if !h.lit(`,"attempt":`) || !h.integer() {
		return false
	}
	if h.lit(`,"error":`) && !h.str() {
		return false
	}
	if h.lit(`,"retry_after":`) && !h.integer() {
		return false
	}
	return h.lit("}")
}

// str consumes a JSON string of printable ASCII without escapes.
func (h *historyScan) str() bool {
	if !h.lit(`"`) {
		return false
	}
	for ; h.i < len(h.b); h.i++ {
		switch c := h.b[h.i]; {
		case c == '"':
			h.i++
			return true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return false
		}
	}
	return false
}

// integer consumes a JSON integer of at most 18 digits (so it fits an int64).
func (h *historyScan) integer() bool {
	h.lit("-")
	start := h.i
	for h.i < len(h.b) && h.b[h.i] >= '0' && h.b[h.i] <= '9' {
		h.i++
	}
	n := h.i - start
	return n >= 1 && n <= 18 && (n == 1 || h.b[start] != '0')
}
