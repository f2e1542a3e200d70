package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// bbolt checks its pages, not what the pages hold: one changed byte inside a
// record passes Check, and the record's owner finds out when it decodes it,
// after berth has written to the file and replaced its backup (issue 19).
// Records are therefore sealed with a checksum, and Check decodes every
// record with the owner's RecordCheck before anything writes.

// sealMark separates a sealed value from its checksum. JSON never holds a
// raw NUL byte (control characters are escaped), so a value whose fifth
// byte from the end is NUL was sealed; others predate sealing.
const sealMark = 0x00

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Seal appends a checksum to v (a JSON record), for Unseal to verify.
func Seal(v []byte) []byte {
	out := make([]byte, len(v)+5)
	copy(out, v)
	out[len(v)] = sealMark
	binary.BigEndian.PutUint32(out[len(v)+1:], crc32.Checksum(v, castagnoli))
	return out
}

// ErrChecksum says a sealed record's bytes changed after it was written.
var ErrChecksum = errors.New("the record's checksum does not match its bytes: it was changed on disk after berth wrote it")

// Unseal returns the record Seal wrapped, verified. A value written before
// records were sealed is returned as it is, for the decoder to judge.
func Unseal(b []byte) ([]byte, error) {
	n := len(b)
	if n < 5 || b[n-5] != sealMark {
		return b, nil
	}
	v := b[:n-5]
	if crc32.Checksum(v, castagnoli) != binary.BigEndian.Uint32(b[n-4:]) {
		return nil, ErrChecksum
	}
	return v, nil
}

// Sealed reports whether b was written by Seal and still matches its
// checksum (ok), or fails it (err). A sealed record that passes was
// written whole by berth's encoder, so checks need not decode it again;
// an unsealed one (written before records were sealed) must be decoded.
func Sealed(b []byte) (sealed bool, err error) {
	n := len(b)
	if n < 5 || b[n-5] != sealMark {
		return false, nil
	}
	if crc32.Checksum(b[:n-5], castagnoli) != binary.BigEndian.Uint32(b[n-4:]) {
		return true, ErrChecksum
	}
	return true, nil
}

// RecordCheck decodes one value of a top-level bucket as its owner would;
// an error marks the record damaged. Values of nested buckets and bucket
// entries themselves are not passed.
type RecordCheck func(bucket, key, value []byte) error

// RecordError is one damaged record.
type RecordError struct {
	// Bucket and Key locate the record.
	Bucket, Key string
	// Err says what is wrong with it.
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record %s/%s is damaged: %v", e.Bucket, e.Key, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// printableKey shows a key as text when it is text, else in hex (job keys
// are 8-byte big-endian numbers).
func printableKey(k []byte) string {
	for _, c := range k {
		if c < 0x20 || c > 0x7e {
			if len(k) == 8 {
				return fmt.Sprintf("%d", binary.BigEndian.Uint64(k))
			}
			return fmt.Sprintf("%x", k)
		}
	}
	return string(k)
}

// maxRecordErrors bounds how many damaged records Check names.
const maxRecordErrors = 10

// recordProblems collects damaged records while walking a file.
type recordProblems struct {
	check RecordCheck
	errs  []*RecordError
	more  int
}

func (p *recordProblems) visit(bucket, k, v []byte) {
	if p == nil || p.check == nil {
		return
	}
	if err := p.check(bucket, k, v); err != nil {
		if len(p.errs) < maxRecordErrors {
			p.errs = append(p.errs, &RecordError{Bucket: string(bucket), Key: printableKey(k), Err: err})
		} else {
			p.more++
		}
	}
}

func (p *recordProblems) String() string {
	var parts []string
	for _, e := range p.errs {
		parts = append(parts, e.Error())
	}
	if p.more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", p.more))
	}
	return strings.Join(parts, "; ")
}

// Records returns the damaged records a *CorruptError names, if that is
// all that is wrong with the file (its structure is sound).
func Records(err error) []*RecordError {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return nil
	}
	return ce.Records
}
