package images

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// Limits bound what one pull may download and write: registries and images
// are hostile input, and the cache shares its file system with every other
// tenant of the host. A pull stops as soon as one is passed, and what it
// unpacked of the layer is removed. Zero fields are no limit.
type Limits struct {
	// LayerBytes bounds a layer's compressed size: the size its manifest
	// declares is checked before the download, and the stream is cut
	// when it passes either.
	LayerBytes int64 `json:"layer_bytes,omitempty"`
	// ImageBytes bounds the unpacked bytes of one image's layers.
	ImageBytes int64 `json:"image_bytes,omitempty"`
	// ImageEntries bounds the files, directories and links of one image.
	ImageEntries int64 `json:"image_entries,omitempty"`
	// Reserve is the free space of the cache's file system that no pull
	// eats into: the unpack stops before a file would leave less.
	Reserve int64 `json:"reserve,omitempty"`
}

// budget is what is left of the limits for one image's pull.
type budget struct {
	lim     Limits
	dir     string // where free space is measured
	bytes   int64  // unpacked so far
	entries int64
}

// take books one entry of size bytes, or says which limit it would pass.
func (b *budget) take(size int64) error {
	b.entries++
	b.bytes += size + 512
	if b.lim.ImageEntries > 0 && b.entries > b.lim.ImageEntries {
		return &limitError{what: "entries", limit: b.lim.ImageEntries, key: "max_image_entries"}
	}
	if b.lim.ImageBytes > 0 && b.bytes > b.lim.ImageBytes {
		return &limitError{what: "unpacked bytes", limit: b.lim.ImageBytes, key: "max_image_size"}
	}
	if b.lim.Reserve > 0 && size > 0 {
		if free := freeBytes(b.dir); free >= 0 && free-size < b.lim.Reserve {
			return &reserveError{free: free, need: size, reserve: b.lim.Reserve}
		}
	}
	return nil
}

// freeBytes is the space left to unprivileged writers on dir's file system,
// or -1 when it cannot be measured.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// limitError is an image past one of its Limits.
type limitError struct {
	what  string
	limit int64
	key   string
}

func (e *limitError) Error() string {
	return fmt.Sprintf("the image holds more than %d %s ([images] %s); the pull was stopped and its partial layer removed", e.limit, e.what, e.key)
}

// reserveError is a pull stopped at the file system's reserve.
type reserveError struct {
	free, need, reserve int64
}

func (e *reserveError) Error() string {
	return fmt.Sprintf("a file of %d bytes would leave less than the %d bytes of free space kept in reserve (%d free); the pull was stopped and its partial layer removed", e.need, e.reserve, e.free)
}

// capReader fails a layer's download once it passes limit bytes.
type capReader struct {
	r     io.Reader
	n     int64
	limit int64
	key   string
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.limit > 0 && c.n > c.limit {
		return n, &limitError{what: "compressed bytes in one layer", limit: c.limit, key: c.key}
	}
	return n, err
}
