package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/jobsource/gitlab"
)

// GitLabLedger is the ledger of a GitLab source under [ha]
// (gitlab.Ledger): the jobs GitLab handed to the fleet's leader, kept in
// etcd under <prefix>gitlab-jobs/<runner>/<job id> until their final state
// reached GitLab. A leader killed for good leaves them there, and the next
// leader, whichever manager it is, fails them on GitLab at the start of
// its term.
//
// Each write is fenced by the term of the writer, as a Store Save is: a
// deposed leader can neither record a job nor remove one, and each record
// names the term that wrote it, so that Abandoned lists exactly the jobs
// of earlier terms. It is safe for concurrent use.
type GitLabLedger struct {
	cli *clientv3.Client
	// dir is <prefix>gitlab-jobs/<runner>/.
	dir string
	// fence is the current term's fence; nil as a standby.
	fence func() *Fence
	log   *slog.Logger
}

var _ gitlab.Ledger = (*GitLabLedger)(nil)

// gitlabRecord is the value of a ledger key: the job and the term that
// recorded it.
type gitlabRecord struct {
	gitlab.LedgerEntry
	// TermKey and TermRev are the recording leader's Fence.
	TermKey string `json:"term_key"`
	TermRev int64  `json:"term_rev"`
}

// NewGitLabLedger keeps the jobs of one GitLab runner (runner names the
// GitLab and token, without the token) under prefix. fence returns the
// fence of the term this manager holds, nil when it holds none.
func NewGitLabLedger(cli *clientv3.Client, prefix, runner string, fence func() *Fence, log *slog.Logger) *GitLabLedger {
	if log == nil {
		log = slog.Default()
	}
	return &GitLabLedger{cli: cli, dir: prefix + "gitlab-jobs/" + runner + "/", fence: fence, log: log}
}

func (l *GitLabLedger) key(id int64) string { return l.dir + strconv.FormatInt(id, 10) }

// Add records the job in the current term.
func (l *GitLabLedger) Add(ctx context.Context, e gitlab.LedgerEntry) error {
	f, err := l.currentFence()
	if err != nil {
		return err
	}
	data, err := json.Marshal(gitlabRecord{LedgerEntry: e, TermKey: f.Key, TermRev: f.Rev})
	if err != nil {
		return err
	}
	if err := l.fenced(ctx, f, clientv3.OpPut(l.key(e.ID), string(data))); err != nil {
		return fmt.Errorf("record gitlab job %d in etcd: %w", e.ID, err)
	}
	return nil
}

// Remove forgets the job, if this manager still leads.
func (l *GitLabLedger) Remove(ctx context.Context, id int64) error {
	f, err := l.currentFence()
	if err != nil {
		return err
	}
	if err := l.fenced(ctx, f, clientv3.OpDelete(l.key(id))); err != nil {
		return fmt.Errorf("forget gitlab job %d in etcd: %w", id, err)
	}
	return nil
}

// Abandoned lists the jobs recorded in earlier terms: their leader is
// dead, deposed or this manager in a term that ended. Only a leader asks.
// A record that cannot be read cannot be failed either: it is logged and
// removed.
func (l *GitLabLedger) Abandoned(ctx context.Context) ([]gitlab.LedgerEntry, error) {
	f, err := l.currentFence()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	resp, err := l.cli.Get(ctx, l.dir, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list the gitlab jobs in etcd under %q: %w", l.dir, err)
	}
	var left []gitlab.LedgerEntry
	for _, kv := range resp.Kvs {
		rec, err := l.decode(string(kv.Key), kv.Value)
		if err != nil {
			l.log.Warn("unreadable record of a gitlab job handed out; removed", "key", string(kv.Key), "err", err)
			_ = l.fenced(ctx, f, clientv3.OpDelete(string(kv.Key)))
			continue
		}
		if rec.TermKey != f.Key || rec.TermRev != f.Rev {
			left = append(left, rec.LedgerEntry)
		}
	}
	return left, nil
}

// decode reads a record and checks it names the job of its key.
func (l *GitLabLedger) decode(key string, value []byte) (gitlabRecord, error) {
	var rec gitlabRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return rec, err
	}
	if want := strings.TrimPrefix(key, l.dir); strconv.FormatInt(rec.ID, 10) != want {
		return rec, fmt.Errorf("the record is of job %d, not of job %s", rec.ID, want)
	}
	return rec, nil
}

// currentFence returns the term's fence, or ErrNotLeader.
func (l *GitLabLedger) currentFence() (*Fence, error) {
	f := l.fence()
	if f == nil {
		return nil, ErrNotLeader
	}
	if err := f.Ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w (its term ended: %v)", ErrNotLeader, context.Cause(f.Ctx))
	}
	return f, nil
}

// fenced applies op only while f's election key holds; ErrFenced once
// another manager leads.
func (l *GitLabLedger) fenced(ctx context.Context, f *Fence, op clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	defer context.AfterFunc(f.Ctx, cancel)()
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)).
		Then(op).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrFenced
	}
	return nil
}
