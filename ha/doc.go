// Package ha lets two or three berth managers share one fleet through an
// etcd cluster: the core's durable state lives in etcd (Store, the same
// store.Store the bbolt file implements) and the managers elect one leader
// (Elector) whose every write is fenced by its election key.
//
// # Keys
//
// Everything lives under one prefix (default "/berth/"):
//
//	<prefix>meta/id                  the state's identity (store.Store.ID), checked every term (identity.go)
//	<prefix>meta/version             the key layout's version, "1"
//	<prefix>meta/saved               present once a state was saved
//	<prefix>state/pending            pending increases, a JSON list of times
//	<prefix>state/arrivals           the learned arrival model, JSON
//	<prefix>state/learned            what the core learned beyond it (scaler.Learned), JSON
//	<prefix>state/instances/<id>     one scaler.InstanceRecord, JSON
//	<prefix>state/reservations/<key> one scaler.ReservationRecord, JSON
//	<prefix>state/environments/<key> one scaler.EnvRecord, JSON
//	<prefix>election/<lease>         the managers' candidacies
//	<prefix>hostkeys/<group>/<id>    host keys a provider plugin could not report (manager)
//	<prefix>gitlab-jobs/<runner>/<id> a GitLab job handed out and not yet ended on GitLab (gitlabledger.go)
//
// # Fencing
//
// A Save is one etcd transaction that only applies while the leader's own
// election key still exists with the creation revision it won with
// (clientv3.Compare(clientv3.CreateRevision(key), "=", rev)). The key is
// attached to the leader's lease: once the lease expires (the manager was
// paused, partitioned or its etcd connection died) the key is gone, the
// next leader's key is the lowest, and every later write of the old leader
// fails with ErrFenced whatever its own clock believes. Two managers can
// therefore never both change the state: a split brain is impossible by
// construction rather than avoided by timing.
//
// A Save writes only the records that changed since the last one (a
// booking touches one or two keys), all in the same transaction, so etcd
// never holds half a state.
//
// # Reading
//
// Load checks every value: a value that is not valid JSON, or whose record
// names another key than the one it is stored under, is refused with the
// key, so that a hand edit or a second writer is caught instead of
// silently changing the fleet.
package ha
