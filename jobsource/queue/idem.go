package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// A submit may apply without its submitter hearing so: a leader frozen
// after the commit, a standby that gave up forwarding (issue 32). A client
// that sends the header IdempotencyHeader with a key of its own can send
// the same submit again: a key already used by the same owner answers
// with the job it made, and nothing new is queued. The key is checked in
// the submit's own transaction, so a frozen leader's late commit and the
// retry's cannot both queue a job (etcd refuses the second: the key it
// read changed). The entry goes with its job when retention prunes it.

// IdempotencyHeader is the request header that carries a submit's key.
const IdempotencyHeader = "Idempotency-Key"

// maxIdemKey bounds a key; clients use a UUID or a random hex string.
const maxIdemKey = 128

// bucketIdem maps a hashed (owner, key) to the ID of the job it made.
var bucketIdem = []byte("idempotency")

// idemEntry is the bucket key of key submitted by owner; nil without key.
func idemEntry(owner, key string) []byte {
	if key == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	return []byte(hex.EncodeToString(sum[:16]))
}

// checkIdemKey refuses a key no client would send.
func checkIdemKey(key string) error {
	if len(key) > maxIdemKey {
		return &RequestError{Status: http.StatusBadRequest, Message: fmt.Sprintf("the %s header is %d bytes long; at most %d are allowed (send a UUID)", IdempotencyHeader, len(key), maxIdemKey)}
	}
	return nil
}
