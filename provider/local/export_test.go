//go:build linux

package local

// Watches returns how many instance directories p watches for readiness.
func Watches(p *Provider) int {
	p.mu.Lock()
	w := p.watcher
	p.mu.Unlock()
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// DiskPolled returns how many sandboxes p's disk poller serves.
func DiskPolled(p *Provider) int {
	p.mu.Lock()
	d := p.disks
	p.mu.Unlock()
	if d == nil {
		return 0
	}
	return d.watched()
}
