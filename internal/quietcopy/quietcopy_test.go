package quietcopy_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/berth-ci/berth/internal/quietcopy"
)

// chunky hands out its data in reads of random sizes, as a pipe or an SSH
// channel does: sometimes a few bytes, sometimes more than any buffer.
type chunky struct {
	data []byte
	rng  *rand.Rand
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(c.data), len(p), 1+c.rng.IntN(3*quietcopy.FlowSize))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestCopyKeepsEveryByteInOrder(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		data := make([]byte, rng.IntN(1<<20))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var got bytes.Buffer
		n, err := quietcopy.Copy(&got, &chunky{data: data, rng: rng})
		if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("seed %d: Copy = %d, %v; copied %d of %d bytes intact: %v", seed, n, err, got.Len(), len(data), bytes.Equal(got.Bytes(), data))
		}
	}
}

func TestCopyReportsReadAndWriteErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := quietcopy.Copy(io.Discard, iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Errorf("read error: got %v", err)
	}
	w := failingWriter{boom}
	if _, err := quietcopy.Copy(w, bytes.NewReader([]byte("x"))); !errors.Is(err, boom) {
		t.Errorf("write error: got %v", err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }
