package queue

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fenceProof is the fence a leader write proves.
type fenceProof struct {
	key string
	rev int64
}

// etcdTx is an optimistic transaction: reads at one revision, writes
// buffered until commit.
type etcdTx struct {
	ctx   context.Context
	b     *etcdBackend
	write bool
	rev   int64 // the revision reads are served at; 0 before the first

	reads   map[string]int64  // keys the commit compares → mod revision read (0: absent)
	values  map[string][]byte // key → value read
	modrevs map[string]int64  // key → mod revision of the value read
	seen    map[string]int64  // keys met in scans → mod revision
	cmps    []clientv3.Cmp    // scanned ranges: unchanged since rev

	writes map[string]*[]byte // key → value, nil to delete
	order  []string
}

func newEtcdTx(ctx context.Context, b *etcdBackend, write bool) *etcdTx {
	return &etcdTx{ctx: ctx, b: b, write: write, reads: map[string]int64{}, values: map[string][]byte{}, modrevs: map[string]int64{},
		seen: map[string]int64{}, writes: map[string]*[]byte{}}
}

func (t *etcdTx) sealed() bool { return false }

func (t *etcdTx) at(opts ...clientv3.OpOption) []clientv3.OpOption {
	if t.rev > 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	return opts
}

func (t *etcdTx) get(bucket, k []byte) ([]byte, error) { return t.read(bucket, k, true) }

func (t *etcdTx) peek(bucket, k []byte) ([]byte, error) { return t.read(bucket, k, false) }

// read returns the value under k; record says whether the commit must
// find it unchanged.
func (t *etcdTx) read(bucket, k []byte, record bool) ([]byte, error) {
	full := t.b.key(bucket, k)
	if w, ok := t.writes[full]; ok {
		if w == nil {
			return nil, nil
		}
		return *w, nil
	}
	v, ok := t.values[full]
	if !ok {
		resp, err := t.b.cli.Get(t.ctx, full, t.at()...)
		if err != nil {
			return nil, &readError{err}
		}
		if t.rev == 0 {
			t.rev = resp.Header.Revision
		}
		t.modrevs[full] = 0
		if len(resp.Kvs) > 0 {
			v = resp.Kvs[0].Value
			if v == nil {
				v = []byte{}
			}
			t.modrevs[full] = resp.Kvs[0].ModRevision
		}
		t.values[full] = v
	}
	if record {
		t.reads[full] = t.modrevs[full]
	}
	if v == nil {
		return nil, nil
	}
	return v, t.b.check(bucket, k, v, full)
}

func (t *etcdTx) put(bucket, k, v []byte) error {
	c := make([]byte, len(v)) // never nil: nil means delete
	copy(c, v)
	t.set(t.b.key(bucket, k), c)
	return nil
}

func (t *etcdTx) del(bucket, k []byte) error {
	t.set(t.b.key(bucket, k), nil)
	return nil
}

func (t *etcdTx) set(full string, v []byte) {
	if _, ok := t.writes[full]; !ok {
		t.order = append(t.order, full)
	}
	if v == nil {
		t.writes[full] = nil
		return
	}
	t.writes[full] = &v
}

func (t *etcdTx) scan(bucket []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	start := t.b.bucketPrefix(bucket)
	end := clientv3.GetPrefixRangeEnd(start)
	from, to := start, end
	var last string
	stopped := false
	page := int64(scanPage)
	if !t.write && bytes.Equal(bucket, bucketJobs) {
		page = scriptPrefetch // each page's scripts come in one request
	}
	for !stopped {
		opts := []clientv3.OpOption{clientv3.WithRange(to), clientv3.WithLimit(page)}
		if reverse {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		}
		resp, err := t.b.cli.Get(t.ctx, from, t.at(opts...)...)
		if err != nil {
			return &readError{err}
		}
		if t.rev == 0 {
			t.rev = resp.Header.Revision
		}
		if !t.write && bytes.Equal(bucket, bucketJobs) {
			if err := t.prefetchScripts(resp.Kvs); err != nil {
				return err
			}
		}
		for _, kv := range resp.Kvs {
			last = string(kv.Key)
			t.seen[last] = kv.ModRevision
			v := kv.Value
			if v == nil {
				v = []byte{}
			}
			more, err := fn(t.b.unkey(bucket, kv.Key), v)
			if err != nil {
				return err
			}
			if !more {
				stopped = true
				break
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		if !stopped {
			if reverse {
				to = last
			} else {
				from = last + "\x00"
			}
		}
	}
	if t.write {
		// What the scan saw must not change, nor a key appear in it,
		// up to where it stopped.
		lo, hi := start, end
		if stopped {
			if reverse {
				lo = last
			} else {
				hi = last + "\x00"
			}
		}
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(lo).WithRange(hi), "<", t.rev+1))
	}
	return nil
}

// prefetchScripts reads the scripts of a page of jobs in one range
// request, so that a list of 100 jobs costs a few round trips, not 100.
// Only read transactions do it: a write would have to compare every key.
func (t *etcdTx) prefetchScripts(jobs []*mvccpb.KeyValue) error {
	const most = scriptPrefetch
	if len(jobs) == 0 {
		return nil
	}
	jobs = jobs[:min(len(jobs), most)]
	lo, hi := t.scriptKey(jobs[0].Key), t.scriptKey(jobs[len(jobs)-1].Key)
	if lo > hi {
		lo, hi = hi, lo
	}
	resp, err := t.b.cli.Get(t.ctx, lo, t.at(clientv3.WithRange(hi+"\x00"), clientv3.WithLimit(most))...)
	if err != nil {
		return &readError{err}
	}
	if resp.More {
		return nil // a sparse range: read the scripts one by one
	}
	for _, kv := range jobs {
		t.values[t.scriptKey(kv.Key)] = nil
		t.modrevs[t.scriptKey(kv.Key)] = 0
	}
	for _, kv := range resp.Kvs {
		v := kv.Value
		if v == nil {
			v = []byte{}
		}
		t.values[string(kv.Key)] = v
		t.modrevs[string(kv.Key)] = kv.ModRevision
	}
	return nil
}

// scriptKey is the key of the script of the job under jobKey.
func (t *etcdTx) scriptKey(jobKey []byte) string {
	return t.b.bucketPrefix(bucketScripts) + strings.TrimPrefix(string(jobKey), t.b.bucketPrefix(bucketJobs))
}

func (t *etcdTx) nextSequence() (uint64, error) {
	full := t.b.prefix + "meta/seq"
	var n uint64
	v, err := t.get(bucketMeta, []byte("seq"))
	if err != nil {
		return 0, err
	}
	if v != nil {
		if n, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return 0, &CorruptError{Key: full, Value: bytes.Clone(v), Err: errors.New("the last job ID is not a number")}
		}
	}
	// Never at or below an ID seen before etcd lost its data (etcdfloor.go).
	// But a meta/seq below an ID this manager saw is etcd's past (a
	// restored snapshot): issuing above the floor would raise meta/seq
	// past it and hide the past from CheckPresent, and the jobs issued
	// between, recorded nowhere, would answer 404 for ever (the HA soak
	// lost 16 that way, a submit landing between the restore and the
	// leader's next check). Refuse until the restore is accepted.
	// A read at this transaction's revision may simply be older than a
	// concurrent submit of this manager that raised the floor: only a
	// fresh read below it is the past; otherwise the transaction runs
	// again on fresh reads.
	floor := t.b.floor.Load()
	if v != nil && n < floor {
		now, err := t.b.seq(t.ctx)
		if err != nil {
			return 0, err
		}
		if now >= floor {
			return 0, errConflict
		}
		return 0, &PastError{Prefix: t.b.prefix, Seq: now, Seen: floor}
	}
	n = max(n, floor) + 1
	t.set(full, []byte(strconv.FormatUint(n, 10)))
	return n, nil
}

// commit sends the writes as one Txn that applies only if nothing read
// changed and, with f, the leader's election key is still the one it won.
func (t *etcdTx) commit(f *fenceProof) error {
	if len(t.order) == 0 {
		return nil
	}
	cmps := append([]clientv3.Cmp(nil), t.cmps...)
	for k, rev := range t.reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
	}
	ops := make([]clientv3.Op, 0, len(t.order))
	puts, dels := 0, 0
	for _, k := range t.order {
		if _, read := t.reads[k]; !read {
			if rev, ok := t.seen[k]; ok {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
			}
		}
		if v := t.writes[k]; v != nil {
			ops = append(ops, clientv3.OpPut(k, string(*v)))
			puts++
		} else {
			ops = append(ops, clientv3.OpDelete(k))
			dels++
		}
	}
	var orElse []clientv3.Op
	if f != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev))
		orElse = append(orElse, clientv3.OpGet(f.key))
	}
	resp, err := t.b.cli.Txn(t.ctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
	if err != nil {
		// The reply was lost (timeout, member gone): the Txn may have
		// applied. A take that applied unseen would leave a job
		// "running" that nobody runs, so look before reporting failure.
		// etcd itself does this at its quota: it applies the Txn that
		// crosses it, raises the NOSPACE alarm and answers NOSPACE.
		if ok, cerr := t.applied(); cerr != nil || !ok {
			return err
		}
		t.b.log().Warn("an etcd transaction's reply was lost, but it had applied; carrying on", "err", err)
	} else if !resp.Succeeded {
		if f != nil && !fenceHolds(resp, f) {
			return ErrFenced
		}
		return errConflict
	}
	t.b.txns.Add(1)
	t.b.puts.Add(int64(puts))
	t.b.dels.Add(int64(dels))
	return nil
}

// applied says whether this transaction's writes are in etcd as it made
// them: every key it put holds its value, all with one mod revision newer
// than its reads, and every key it deleted is gone. Another transaction
// writing the same values to the same keys at once is not a case berth
// meets (records carry nanosecond times). A transaction that only deletes
// cannot be told apart and counts as not applied.
func (t *etcdTx) applied() (bool, error) {
	ctx, cancel := context.WithTimeout(t.b.ctx, etcdOpTimeout)
	defer cancel()
	var rev int64
	for _, k := range t.order {
		resp, err := t.b.cli.Get(ctx, k)
		if err != nil {
			return false, err
		}
		w := t.writes[k]
		if w == nil {
			if len(resp.Kvs) != 0 {
				return false, nil
			}
			continue
		}
		if len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, *w) || resp.Kvs[0].ModRevision <= t.rev ||
			(rev != 0 && resp.Kvs[0].ModRevision != rev) {
			return false, nil
		}
		rev = resp.Kvs[0].ModRevision
	}
	return rev > 0, nil
}

// fenceHolds reads the Else branch of a failed fenced Txn: whether the
// leader's key still exists with the revision it won.
func fenceHolds(resp *clientv3.TxnResponse, f *fenceProof) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	return len(kvs) == 1 && kvs[0].CreateRevision == f.rev
}
