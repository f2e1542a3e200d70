package local

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/provider"
)

// observed is what Update learned about an instance, valid as long as its
// meta.json is the same file: writeJSONStat replaces it by a rename, so every
// change of the desired state, PID or cgroup is a new inode.
//
// The manager calls Update on every state change of the fleet, so during a
// burst of 1,000 sandboxes each call re-read 1,000 meta.json files, their
// /proc/PID/stat, cgroup.events and ready files: a fifth of berth's CPU.
// With this cache an unchanged instance costs one stat of meta.json (and of
// its ready file until it is ready); liveness of a sandbox this process
// started comes from its reaper, not from /proc.
type observed struct {
	ino, size uint64
	mtime     unix.Timespec
	m         *meta
	ready     bool // the ready file was seen non-empty for this meta
	thawed    bool // the cgroup was seen (or made) not frozen for this meta
	// deathLogged says the sandbox's end was logged (once per instance).
	deathLogged bool
	// mine says that this process wrote this meta.json (saveMeta). One
	// state directory belongs to one berth process, and every write of
	// meta.json goes through saveMeta, so a listing trusts what this
	// process wrote without a stat: a listing of 1,000 instances cost
	// 1,000 stats, and the fleet lists after every sandbox that becomes
	// ready. A meta.json a previous process wrote is checked by stat.
	mine bool
}

// child is a sandbox process this provider process started and reaps.
type child struct {
	pid  int
	done <-chan struct{} // closed once the process is reaped
}

// lookMeta returns the cached observation of instance id when meta.json
// is unchanged, else reads it afresh. With trustMine, what this process
// wrote itself is returned without a stat (see observed.mine): only for
// listings, which found the instance directory just now. The caller holds
// the instance lock.
func (p *Provider) lookMeta(id string, trustMine bool) (*observed, error) {
	p.mu.Lock()
	o := p.seen[id]
	p.mu.Unlock()
	if trustMine && o != nil && o.mine {
		return o, nil
	}
	path := filepath.Join(p.instDir(id), metaFile)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		p.forget(id)
		if errors.Is(err, unix.ENOENT) {
			return nil, os.ErrNotExist
		}
		return nil, err
	}
	if o != nil && o.ino == st.Ino && o.size == uint64(st.Size) && o.mtime == st.Mtim {
		return o, nil
	}
	m, err := readMeta(p.instDir(id))
	if err != nil {
		p.forget(id)
		return nil, err
	}
	o = &observed{ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim, m: m}
	p.mu.Lock()
	p.seen[id] = o
	p.mu.Unlock()
	return o, nil
}

// saveMeta writes m as meta.json at path (the instance's directory, or the
// directory create renames into place) and remembers what it wrote, so the
// next listing need not read it back: a creation writes meta.json twice,
// and each write used to cost the next Update a read and a JSON decode per
// instance. thawed says that the instance's cgroup is known not to be
// frozen (start just made it). The cache keeps a copy: callers go on
// changing m.
func (p *Provider) saveMeta(path string, m *meta, thawed bool) error {
	st, err := writeJSONStat(path, m)
	if err != nil {
		// Whether the old or no file is there now, read it next time.
		p.mu.Lock()
		delete(p.seen, m.ID)
		p.mu.Unlock()
		return err
	}
	c := *m
	o := &observed{ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim, m: &c, thawed: thawed, mine: true}
	p.mu.Lock()
	p.seen[m.ID] = o
	p.mu.Unlock()
	return nil
}

// forget drops what is cached about instance id.
func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.seen, id)
	delete(p.children, id)
	p.mu.Unlock()
	p.execs.drop(id)
}

// startedChild records the sandbox process this provider started for id.
func (p *Provider) startedChild(id string, pid int, done <-chan struct{}) {
	p.mu.Lock()
	p.children[id] = child{pid, done}
	p.mu.Unlock()
}

// runningNow is p.running without reading /proc for a sandbox this
// process started and still reaps: an unreaped child keeps its PID.
func (p *Provider) runningNow(id string, m *meta) bool {
	p.mu.Lock()
	c, ok := p.children[id]
	p.mu.Unlock()
	if ok && m.PID > 0 && c.pid == m.PID {
		select {
		case <-c.done:
			return false
		default:
			return true
		}
	}
	return p.running(m)
}

func (p *Provider) observe(id string) (provider.State, bool) {
	defer p.lock(id)()
	o, err := p.lookMeta(id, true)
	if errors.Is(err, os.ErrNotExist) {
		return "", false // deleted meanwhile
	}
	if err != nil {
		p.log.Warn("unreadable instance", "id", id, "err", err)
		return provider.StateTimeout, true
	}
	m := o.m
	switch m.State {
	case wantDeleting:
		if err := p.destroy(m); err != nil {
			p.log.Warn("finish deletion", "id", id, "err", err)
			return provider.StateDeleting, true
		}
		return provider.StateDeleted, true
	case wantSuspended:
		if p.running(m) && (m.Cgroup == "" || !cgroupFrozen(m.Cgroup)) {
			if err := p.stop(m); err != nil {
				p.log.Warn("re-suspend", "id", id, "err", err)
			}
		}
		return provider.StateSuspended, true
	}
	if m.Cgroup != "" && !o.thawed {
		// A resume that was interrupted between thawing and recording it.
		o.thawed = true
		if cgroupFrozen(m.Cgroup) {
			if err := cgroupFreeze(m.Cgroup, false); err != nil {
				p.log.Warn("thaw", "id", id, "err", err)
				o.thawed = false
			}
		}
	}
	booting := provider.State(m.Boot)
	if booting == "" {
		booting = provider.StateCreating
	}
	if !p.runningNow(id, m) {
		if m.PID == 0 && time.Since(m.StartedAt) < bootTimeout {
			return booting, true
		}
		if m.PID != 0 && !o.deathLogged {
			o.deathLogged = true
			tail, hint := deathNote(p.instDir(id))
			p.log.Warn("sandbox ended without berth stopping it; its instance is replaced and a job on it fails as lost",
				"id", id, "pid", m.PID, "log_tail", tail, "hint", hint)
		}
		return provider.StateTimeout, true
	}
	if o.ready || readyNow(p.instDir(id)) {
		o.ready = true
		return provider.StateRunning, true
	}
	if time.Since(m.StartedAt) > bootTimeout {
		return provider.StateTimeout, true
	}
	return booting, true
}
