package sim

// eventHeap is a min-heap of instances ordered by their next event time,
// ties broken by creation order so that simultaneous events are applied in
// the same order on every run. Each instance is in it at most once and
// remembers its index, so a state change re-positions it in O(log n)
// instead of leaving stale entries behind.
type eventHeap []*instance

func (h eventHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if a.next.Equal(b.next) {
		return a.seq < b.seq
	}
	return a.next.Before(b.next)
}

func (h eventHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}

func (h eventHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (h eventHeap) down(i int) bool {
	start := i
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i != start
}

func (h *eventHeap) push(in *instance) {
	in.hidx = len(*h)
	*h = append(*h, in)
	h.up(in.hidx)
}

func (h *eventHeap) remove(in *instance) {
	i := in.hidx
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	in.hidx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h eventHeap) fix(in *instance) {
	if !h.down(in.hidx) {
		h.up(in.hidx)
	}
}
