package sim

import "container/heap"

// eventHeap is a min-heap (container/heap) of instances ordered by their next
// event time, ties broken by creation order so that simultaneous events are
// applied in the same order on every run. Each instance is in it at most once
// and remembers its index, so a state change re-positions it in O(log n)
// instead of leaving stale entries behind.
type eventHeap []*instance

func (h eventHeap) Len() int { return len(h) }

func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.next.Equal(b.next) {
		return a.seq < b.seq
	}
	return a.next.Before(b.next)
}

func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}

// Push and Pop are for container/heap; use push, remove and fix.
func (h *eventHeap) Push(x any) {
	in := x.(*instance)
	in.hidx = len(*h)
	*h = append(*h, in)
}

func (h *eventHeap) Pop() any {
	old := *h
	in := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	in.hidx = -1
	return in
}

func (h *eventHeap) push(in *instance)   { heap.Push(h, in) }
func (h *eventHeap) remove(in *instance) { heap.Remove(h, in.hidx) }
func (h *eventHeap) fix(in *instance)    { heap.Fix(h, in.hidx) }
