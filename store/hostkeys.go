package store

import (
	bolt "go.etcd.io/bbolt"
)

// bucketHostKeys holds SSH host keys learned by trust on first use, for
// provider plugins that cannot report them. Save does not touch it.
var bucketHostKeys = []byte("host_keys")

func hostKeyKey(group, id string) []byte { return []byte(group + "\x00" + id) }

// HostKey returns the host key recorded for instance id of group, or "".
func (b *Bolt) HostKey(group, id string) (string, error) {
	var key string
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketHostKeys); bk != nil {
			key = string(bk.Get(hostKeyKey(group, id)))
		}
		return nil
	})
	return key, err
}

// PutHostKey records the host key of instance id of group.
func (b *Bolt) PutHostKey(group, id, key string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketHostKeys)
		if err != nil {
			return err
		}
		return bk.Put(hostKeyKey(group, id), []byte(key))
	})
}

// ForgetHostKey drops the record of a deleted instance.
func (b *Bolt) ForgetHostKey(group, id string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucketHostKeys); bk != nil {
			return bk.Delete(hostKeyKey(group, id))
		}
		return nil
	})
}
