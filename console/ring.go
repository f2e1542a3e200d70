package console

// ring keeps the last cap items pushed.
type ring[T any] struct {
	items []T
	next  int // where the next push goes once the ring is full
}

func newRing[T any](n int) ring[T] { return ring[T]{items: make([]T, 0, n)} }

func (r *ring[T]) push(v T) {
	if len(r.items) < cap(r.items) {
		r.items = append(r.items, v)
		return
	}
	r.items[r.next] = v
	r.next = (r.next + 1) % len(r.items)
}

// newest returns up to limit items (all for limit <= 0), newest first,
// that keep returns true for.
func (r *ring[T]) newest(limit int, keep func(*T) bool) []T {
	out := []T{}
	n := len(r.items)
	for i := range n {
		v := &r.items[(r.next-1-i+2*n)%n]
		if keep != nil && !keep(v) {
			continue
		}
		out = append(out, *v)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out
}

// update applies fn to items newest first until it returns true.
func (r *ring[T]) update(fn func(*T) bool) {
	n := len(r.items)
	for i := range n {
		if fn(&r.items[(r.next-1-i+2*n)%n]) {
			return
		}
	}
}
