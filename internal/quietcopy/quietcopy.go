// Package quietcopy copies a stream that is idle most of the time, such as
// a CI job's output, without holding a large buffer while it is idle.
//
// io.Copy allocates 32 KiB per copy and keeps it until the stream ends. A
// job's output streams live as long as the job and are mostly waiting, so
// with thousands of running jobs those buffers were most of the memory a
// running job cost. Copy waits with a 512-byte buffer; a read that fills it
// means output is flowing, and a pooled 32 KiB buffer drains the stream until
// a read comes back short, then goes back to the pool.
package quietcopy

import (
	"io"
	"sync"
)

// QuietSize is the buffer a stream waits with.
const QuietSize = 512

// FlowSize is the buffer a flowing stream is drained with.
const FlowSize = 32 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, FlowSize); return &b }}

// Copy copies src to dst until EOF, like io.Copy (a nil error at EOF), but
// it ignores src's WriterTo and dst's ReaderFrom, so that it can be used to
// implement ReadFrom.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	var small [QuietSize]byte
	var total int64
	for {
		n, err := copyOnce(dst, src, small[:], &total)
		if err == nil && n == len(small) {
			err = drain(dst, src, &total)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// drain copies with a pooled buffer while reads fill it.
func drain(dst io.Writer, src io.Reader, total *int64) error {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	for {
		n, err := copyOnce(dst, src, *bp, total)
		if err != nil || n < len(*bp) {
			return err
		}
	}
}

// copyOnce does one read and writes what it got; a write error ends the copy.
func copyOnce(dst io.Writer, src io.Reader, buf []byte, total *int64) (int, error) {
	n, rerr := src.Read(buf)
	if n > 0 {
		w, werr := dst.Write(buf[:n])
		*total += int64(w)
		if werr != nil {
			return n, werr
		}
		if w < n {
			return n, io.ErrShortWrite
		}
	}
	return n, rerr
}
