package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A fleet's state has an identity, <prefix>meta/id, made once when the
// first manager opens an empty prefix. An etcd restarted empty (a lost
// volume, a restore gone wrong) is not a new fleet: its jobs' IDs would
// count again from 1, the instances would be adopted as idle while old
// jobs still run on them, and the old jobs' ends would be recorded on new
// jobs (issue 32). So a manager that knew the fleet (the caller keeps the
// identity beside its other state, OpenKnownStore) checks at every term
// that etcd still holds it, and refuses to lead otherwise (IdentityError).
// Starting a new fleet on purpose is an explicit act: NewFleet.

// IdentityError says that etcd does not hold the fleet this manager knew:
// its identity is gone (Found == "") or another fleet's is there.
type IdentityError struct {
	// Prefix is the key prefix of the state.
	Prefix string
	// Want is the identity this manager knew; Found what etcd holds.
	Want, Found string
}

func (e *IdentityError) Error() string {
	what := fmt.Sprintf("etcd no longer holds this fleet's state: %smeta/id is gone (this manager knew fleet %s), so etcd was emptied or replaced (a lost volume, a restore gone wrong)", e.Prefix, e.Want)
	if e.Found != "" {
		what = fmt.Sprintf("etcd holds another fleet's state under %q (fleet %s; this manager knew fleet %s)", e.Prefix, e.Found, e.Want)
	}
	return what + "; this manager refuses to lead rather than forget the instances and jobs it knew (job IDs would repeat, running jobs would share instances with new ones): " +
		"restore etcd from a snapshot (etcdutl snapshot restore) and restart the managers, " +
		"or, to start a new fleet on purpose, run `berth state new-fleet --config FILE` on every manager's host and restart them"
}

// OpenKnownStore opens the state of the fleet known as known (the
// identity a manager recorded when it first opened the state): it never
// makes an identity, and a Load refuses with IdentityError while etcd
// holds no identity or another one. An empty known is OpenStore.
func OpenKnownStore(ctx context.Context, cli *clientv3.Client, prefix, known string) (*Store, error) {
	if known == "" {
		return OpenStore(ctx, cli, prefix)
	}
	s := &Store{cli: cli, prefix: prefix, timeout: DefaultOpTimeout, id: known}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := cli.Get(ctx, s.key("meta/version"))
	if err != nil {
		return nil, fmt.Errorf("open berth state in etcd under %q: %w; check ha.etcd_endpoints and that the cluster is healthy (etcdctl endpoint health)", prefix, err)
	}
	if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) != layoutVersion {
		return nil, &CorruptError{Key: s.key("meta/version"), Err: fmt.Errorf("layout version is not %q, the one this berth understands", layoutVersion)}
	}
	return s, nil
}

// checkIdentity returns IdentityError unless meta/id, read at rev (0: the
// latest), is this store's identity.
func (s *Store) checkIdentity(ctx context.Context, rev int64) error {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	before := s.seenRev.Load()
	resp, err := s.cli.Get(ctx, s.key("meta/id"), opts...)
	if err != nil {
		return err
	}
	found := ""
	if len(resp.Kvs) > 0 {
		found = string(resp.Kvs[0].Value)
	}
	if found != s.id {
		return &IdentityError{Prefix: s.prefix, Want: s.id, Found: found}
	}
	// The fleet's own state, but maybe from the past (past.go).
	return s.noteRevision(before, resp.Header.Revision)
}

// CheckIdentity returns IdentityError unless etcd holds this store's
// identity now.
func (s *Store) CheckIdentity(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.checkIdentity(ctx, 0)
}

// NewFleet makes an identity under prefix when there is none (a new
// fleet, on purpose: `berth state new-fleet`) and returns the identity
// etcd holds, and whether it made it.
func NewFleet(ctx context.Context, cli *clientv3.Client, prefix string) (id string, made bool, err error) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, err
	}
	idKey, verKey := prefix+"meta/id", prefix+"meta/version"
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0)).
		Then(clientv3.OpPut(idKey, hex.EncodeToString(raw[:])), clientv3.OpPut(verKey, layoutVersion)).
		Else(clientv3.OpGet(idKey)).
		Commit()
	if err != nil {
		return "", false, fmt.Errorf("make a fleet identity in etcd under %q: %w", prefix, err)
	}
	if resp.Succeeded {
		return hex.EncodeToString(raw[:]), true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || len(kvs[0].Value) == 0 {
		return "", false, &CorruptError{Key: idKey, Err: errors.New("the state identity is empty")}
	}
	return string(kvs[0].Value), false, nil
}
