package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// The Store implements the same interface as the bbolt file, and tells the
// fleet whether it still leads.
var (
	_ store.Store  = (*Store)(nil)
	_ store.Leader = (*Store)(nil)
)

// layoutVersion is the version of the key layout in doc.go.
const layoutVersion = "1"

// DefaultOpTimeout bounds one etcd request of the store: long enough for a
// cluster electing a new etcd leader (about a second with etcd's defaults),
// short enough that a manager cut off from etcd notices within a lease.
const DefaultOpTimeout = 5 * time.Second

// ErrNotLeader is returned by Save and Leading when the store holds no
// fence: this manager is a standby, or its term ended. It matches
// store.ErrFenced.
var ErrNotLeader error = &fenceError{"this manager is not the leader: only the leader writes the shared state"}

// ErrFenced is returned by Save when etcd refused the write, and by Leading
// when etcd no longer holds the fence: another manager leads now. The caller
// must stop acting on the fleet at once; its in-memory state is stale. It
// matches store.ErrFenced.
var ErrFenced error = &fenceError{"write refused by etcd: this manager lost its leadership (its election key is gone), another manager leads now"}

// fenceError is one of the errors above: each is itself, and also the
// store's sentinel, so that the fleet branches on it without importing ha.
type fenceError struct{ msg string }

func (e *fenceError) Error() string { return e.msg }

// Is makes errors.Is(err, store.ErrFenced) hold.
func (e *fenceError) Is(target error) bool { return target == store.ErrFenced }

// ConfirmAfter is how long a proof of leadership (a fenced save, or a read
// of the election key) is trusted by Leading before it asks etcd again.
// Short, because a provider call may follow it: a pause longer than this
// (SIGSTOP, GC, a stalled VM) between proof and call costs one etcd read.
const ConfirmAfter = 250 * time.Millisecond

// Fence is what a write must prove: the leader's election key still exists
// with the creation revision it won with.
type Fence struct {
	// Key is the leader's election key.
	Key string
	// Rev is the key's creation revision.
	Rev int64
	// Ctx ends with the term; a Save after it ended fails without asking etcd.
	Ctx context.Context
}

// Store keeps the core's durable state in etcd under a key prefix. Any
// manager may Load; only the holder of a Fence may Save. It is safe for
// concurrent use.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	id      string
	timeout time.Duration

	mu sync.Mutex
	// fmu guards fence and confirmed, apart from mu, which a Save holds
	// through its etcd round trip: Leading must not wait behind it.
	fmu   sync.Mutex
	fence *Fence
	// confirmed is when the fence was last proved held (the start of the
	// request that proved it); zero when never in this term.
	confirmed time.Time
	// written maps each key under state/ (and meta/saved) to the value etcd
	// holds, as far as this store knows; nil when unknown (before the first
	// Save of a term, or after a failed one), so that Save reads it first.
	written map[string]string
	// lastArrivals and arrivalsJSON cache the arrival model's encoding: the
	// core hands the same pointer until the model changes.
	lastArrivals *scaler.ArrivalModel
	arrivalsJSON string
	// lastLearned and learnedJSON cache the learned state's likewise.
	lastLearned *scaler.Learned
	learnedJSON string
	// stats counts what Saves sent to etcd.
	stats Stats
	// seenRev is the highest etcd revision this store saw (past.go).
	seenRev atomic.Int64
}

// Stats counts the writes a Store sent to etcd.
type Stats struct {
	// Txns is the number of committed transactions.
	Txns int64
	// Puts and Deletes are the keys they wrote and deleted.
	Puts, Deletes int64
	// Bytes is the keys and values sent in them (a delete sends its key).
	Bytes int64
}

// Stats returns the writes so far.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// OpenStore opens the state under prefix (which should end in "/"),
// creating its identity on first use. Two managers opening a new prefix at
// once agree on one identity.
func OpenStore(ctx context.Context, cli *clientv3.Client, prefix string) (*Store, error) {
	s := &Store{cli: cli, prefix: prefix, timeout: DefaultOpTimeout}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	idKey, verKey := s.key("meta/id"), s.key("meta/version")
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0)).
		Then(clientv3.OpPut(idKey, hex.EncodeToString(raw[:])), clientv3.OpPut(verKey, layoutVersion)).
		Else(clientv3.OpGet(idKey), clientv3.OpGet(verKey)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("open berth state in etcd under %q: %w; check ha.etcd_endpoints and that the cluster is healthy (etcdctl endpoint health)", prefix, err)
	}
	if resp.Succeeded {
		s.id = hex.EncodeToString(raw[:])
		return s, nil
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) != 1 || string(kvs[0].Value) != layoutVersion {
		return nil, &CorruptError{Key: verKey, Err: fmt.Errorf("layout version is not %q, the one this berth understands", layoutVersion)}
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || len(kvs[0].Value) == 0 {
		return nil, &CorruptError{Key: idKey, Err: errors.New("the state identity is empty")}
	}
	s.id = string(kvs[0].Value)
	return s, nil
}

func (s *Store) key(rel string) string { return s.prefix + rel }

// ID returns the state's identity.
func (s *Store) ID() string { return s.id }

// Prefix returns the key prefix the state lives under.
func (s *Store) Prefix() string { return s.prefix }

// SetFence makes later Saves conditional on f; nil makes them refused. A
// new term starts from what etcd holds, not from what this store wrote in
// an earlier one.
func (s *Store) SetFence(f *Fence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fmu.Lock()
	s.fence, s.confirmed = f, time.Time{}
	s.fmu.Unlock()
	s.written = nil
}

// currentFence returns the fence, or why there is none usable.
func (s *Store) currentFence() (*Fence, error) {
	s.fmu.Lock()
	f := s.fence
	s.fmu.Unlock()
	if f == nil {
		return nil, ErrNotLeader
	}
	if err := f.Ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w (its term ended: %v)", ErrNotLeader, context.Cause(f.Ctx))
	}
	return f, nil
}

// proved records that f was held at start, unless the fence changed since.
func (s *Store) proved(f *Fence, start time.Time) {
	s.fmu.Lock()
	if s.fence == f && start.After(s.confirmed) {
		s.confirmed = start
	}
	s.fmu.Unlock()
}

// Leading returns nil while this manager holds its fence: its term is live
// and etcd held the election key with the revision it won within the last
// ConfirmAfter (a fenced save counts), or holds it now. Otherwise
// ErrNotLeader or ErrFenced (both match store.ErrFenced), or the etcd error
// when it could not tell.
func (s *Store) Leading() error {
	f, err := s.currentFence()
	if err != nil {
		return err
	}
	s.fmu.Lock()
	fresh := time.Since(s.confirmed) < ConfirmAfter
	s.fmu.Unlock()
	if fresh {
		return nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(f.Ctx, s.timeout)
	defer cancel()
	before := s.seenRev.Load()
	resp, err := s.cli.Get(ctx, f.Key)
	if err != nil {
		if f.Ctx.Err() != nil {
			return fmt.Errorf("%w (its term ended: %v)", ErrNotLeader, context.Cause(f.Ctx))
		}
		return fmt.Errorf("confirm leadership with etcd (read %s): %w; not acting until it answers", f.Key, err)
	}
	if err := s.noteRevision(before, resp.Header.Revision); err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != f.Rev {
		return fmt.Errorf("confirm leadership: %w", ErrFenced)
	}
	s.proved(f, start)
	return nil
}

// Close releases nothing: the etcd client belongs to the caller.
func (s *Store) Close() error { return nil }

// Load returns the saved state, read at one revision, with every value checked.
func (s *Store) Load() (scaler.State, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	saved, kvs, rev, err := s.read(ctx)
	if err != nil {
		return scaler.State{}, false, fmt.Errorf("load berth state from etcd under %q: %w", s.prefix, err)
	}
	// Every term loads: the identity is checked at the revision read, so
	// an emptied etcd is never taken for a new fleet.
	if err := s.checkIdentity(ctx, rev); err != nil {
		var ie *IdentityError
		if errors.As(err, &ie) {
			return scaler.State{}, false, err
		}
		return scaler.State{}, false, fmt.Errorf("load berth state from etcd under %q: %w", s.prefix, err)
	}
	if saved == nil {
		return scaler.State{}, false, nil
	}
	var st scaler.State
	for _, kv := range kvs {
		if err := s.decodeInto(&st, string(kv.Key), kv.Value); err != nil {
			return scaler.State{}, false, err
		}
	}
	return st, true, nil
}

// read returns meta/saved (nil when absent) and the keys under state/, both
// at one revision. Plain ranges rather than a transaction: the client
// retries a read that met a member stopping or a raft election.
func (s *Store) read(ctx context.Context) (saved *mvccpb.KeyValue, kvs []*mvccpb.KeyValue, rev int64, err error) {
	resp, err := s.cli.Get(ctx, s.key("state/"), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, 0, err
	}
	rev = resp.Header.Revision
	meta, err := s.cli.Get(ctx, s.key(keySaved), clientv3.WithRev(rev))
	if err != nil {
		return nil, nil, 0, err
	}
	if len(meta.Kvs) > 0 {
		saved = meta.Kvs[0]
	}
	return saved, resp.Kvs, rev, nil
}

// Save replaces the saved state in one fenced transaction holding only
// the keys that changed.
func (s *Store) Save(st scaler.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fence, err := s.currentFence()
	if err != nil {
		return err
	}
	want, err := s.encode(st)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(fence.Ctx, s.timeout)
	defer cancel()
	if s.written == nil {
		if s.written, err = s.current(ctx); err != nil {
			return err
		}
	}
	ops := s.diff(want, s.kept(st))
	if len(ops) == 0 {
		return nil
	}
	start := time.Now()
	before := s.seenRev.Load()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(fence.Key), "=", fence.Rev)).
		Then(ops...).
		Commit()
	if err != nil {
		s.written = nil
		return saveError(s.prefix, len(ops), err)
	}
	if err := s.noteRevision(before, resp.Header.Revision); err != nil {
		s.written = nil
		return err
	}
	if !resp.Succeeded {
		s.written = nil
		return fmt.Errorf("save berth state under %q: %w", s.prefix, ErrFenced)
	}
	s.proved(fence, start)
	s.apply(want, s.kept(st))
	s.count(ops)
	return nil
}

// count adds a committed transaction's operations to the stats.
func (s *Store) count(ops []clientv3.Op) {
	s.stats.Txns++
	for _, op := range ops {
		if op.IsPut() {
			s.stats.Puts++
			s.stats.Bytes += int64(len(op.KeyBytes()) + len(op.ValueBytes()))
		} else {
			s.stats.Deletes++
			s.stats.Bytes += int64(len(op.KeyBytes()))
		}
	}
}

// saveError explains a failed write; etcd's limit on operations per
// transaction is the one a large fleet can meet on its first save.
func saveError(prefix string, ops int, err error) error {
	msg := fmt.Sprintf("save berth state to etcd under %q (%d changed keys): %v", prefix, ops, err)
	if strings.Contains(err.Error(), "too many operations in txn request") {
		msg += "; raise the etcd cluster's --max-txn-ops (default 128) above the number of changed keys"
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// current reads the keys a Save may change, to diff against.
func (s *Store) current(ctx context.Context) (map[string]string, error) {
	saved, kvs, _, err := s.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read berth state under %q before saving: %w", s.prefix, err)
	}
	m := map[string]string{}
	if saved != nil {
		m[string(saved.Key)] = string(saved.Value)
	}
	for _, kv := range kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m, nil
}

// kept is the keys a Save of st leaves as they are when st has no value
// for them: the arrival model and the learned state, which the core hands
// over only once it has them, as the bbolt store does.
func (s *Store) kept(st scaler.State) []string {
	var k []string
	if st.Arrivals == nil {
		k = append(k, s.key(keyArrivals))
	}
	if st.Learned == nil {
		k = append(k, s.key(keyLearned))
	}
	return k
}

// diff returns the puts and deletes that turn written into want, leaving
// the keys of keep as they are.
func (s *Store) diff(want map[string]string, keep []string) []clientv3.Op {
	var ops []clientv3.Op
	for k, v := range want {
		if old, ok := s.written[k]; !ok || old != v {
			ops = append(ops, clientv3.OpPut(k, v))
		}
	}
	for k := range s.written {
		if _, ok := want[k]; !ok && !slices.Contains(keep, k) {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	return ops
}

// apply records a committed Save in written.
func (s *Store) apply(want map[string]string, keep []string) {
	old := s.written
	s.written = want
	for _, k := range keep {
		if v, ok := old[k]; ok {
			s.written[k] = v
		}
	}
}
