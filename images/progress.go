package images

import "io"

// PullProgress is what Config.Progress hears while a pull runs, so that
// the caller can show it (a job's log says "Pulling image X" and how far
// each layer got). The cache itself logs only one line per pull.
type PullProgress struct {
	// Image is the reference as the job wrote it.
	Image string
	// Layer is the layer's digest; "" for the start of the pull, before
	// the registry answered.
	Layer string
	// Index (from 1) and Count place the layer in the image.
	Index, Count int
	// Read is how many compressed bytes of the layer were read so far;
	// Size is its compressed size from the manifest (0 when unknown).
	Read, Size int64
	// Done is set once the layer is unpacked; Cached when it was in the
	// cache already and nothing was read.
	Done, Cached bool
}

// progress reports p when the cache has a Progress callback.
func (c *Cache) progress(p PullProgress) {
	if c.cfg.Progress != nil {
		c.cfg.Progress(p)
	}
}

// progressReader reports each read of a layer's compressed bytes.
type progressReader struct {
	r    io.Reader
	c    *Cache
	p    PullProgress
	read int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	if n > 0 {
		pr.p.Read += int64(n)
		pr.c.progress(pr.p)
	}
	return n, err
}
