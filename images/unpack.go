package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// errCorrupt marks a layer whose bytes are not what its digest says, or not
// a readable tarball.
var errCorrupt = errors.New("corrupt layer")

// unpackLayer reads a layer's compressed stream r, checks that it hashes to
// digest ("sha256:HEX") and unpacks it into dir, which must be a fresh empty
// directory, within what is left of b (nil: no limits). It returns the
// bytes the layer's files take. The digest is computed as the bytes stream
// in; the caller moves dir into the cache only after it matched.
func unpackLayer(r io.Reader, digest, dir string, b *budget) (int64, error) {
	want, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return 0, fmt.Errorf("%w: unsupported digest %q", errCorrupt, digest)
	}
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), 64<<10)
	tr, err := decompress(br)
	if err != nil {
		return 0, err
	}
	size, err := unpackTar(tar.NewReader(tr), dir, b)
	var le *limitError
	var re *reserveError
	if errors.As(err, &le) || errors.As(err, &re) {
		return 0, err // stop now: the rest of a bomb is not worth reading
	}
	if err != nil {
		// A tar error on bytes that fail the digest is the digest's fault.
		io.Copy(io.Discard, br)
		if got := hex.EncodeToString(h.Sum(nil)); got != want && !isDiskFull(err) {
			return 0, fmt.Errorf("%w: %s has digest sha256:%s (%v)", errCorrupt, digest, got, err)
		}
		return 0, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return 0, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return 0, fmt.Errorf("%w: %s downloaded with digest sha256:%s", errCorrupt, digest, got)
	}
	return size, nil
}

func isDiskFull(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// decompress recognises gzip, zstd and plain tar by their first bytes.
func decompress(br *bufio.Reader) (io.Reader, error) {
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		return zr, nil
	case len(magic) == 4 && string(magic) == "\x28\xb5\x2f\xfd":
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		return zr.IOReadCloser(), nil
	}
	return br, nil
}

// unpackTar writes every entry of tr below dir, refusing anything that
// would land outside it.
func unpackTar(tr *tar.Reader, dir string, b *budget) (int64, error) {
	var size int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return size, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: read tar: %v", errCorrupt, err)
		}
		rel, ok := cleanEntry(hdr.Name)
		if !ok {
			return 0, fmt.Errorf("%w: entry %q leaves the layer", errCorrupt, hdr.Name)
		}
		if rel == "" {
			continue // the layer's root itself
		}
		if b != nil {
			if err := b.take(hdr.Size); err != nil {
				return 0, err
			}
		}
		n, err := unpackEntry(tr, hdr, dir, rel)
		if err != nil {
			return 0, fmt.Errorf("unpack %q: %w", hdr.Name, err)
		}
		size += n + 512
	}
}

// cleanEntry turns a tar name into a relative slash path inside the layer;
// ok is false for names that climb out of it.
func cleanEntry(name string) (string, bool) {
	p := path.Clean("/" + name)
	if strings.Contains(name, "\x00") {
		return "", false
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", false
		}
	}
	return strings.TrimPrefix(p, "/"), true
}

// unpackEntry creates one entry. Its parents are created as directories and
// must not be symlinks, so nothing is ever written through a link.
func unpackEntry(tr *tar.Reader, hdr *tar.Header, dir, rel string) (int64, error) {
	parent, base := path.Split(rel)
	pdir, err := safeMkdirAll(dir, strings.TrimSuffix(parent, "/"))
	if err != nil {
		return 0, err
	}
	target := filepath.Join(pdir, base)
	if base == ".wh..wh..opq" {
		return 0, unix.Setxattr(pdir, "user.overlay.opaque", []byte("y"), 0)
	}
	if name, ok := strings.CutPrefix(base, ".wh."); ok {
		if !validWhiteout(name) {
			// ".wh..." names "..": the layer's parent, the cache's own tmp.
			return 0, fmt.Errorf("%w: whiteout %q names %q, not a file of the layer", errCorrupt, hdr.Name, name)
		}
		target = filepath.Join(pdir, name)
		os.RemoveAll(target)
		return 0, unix.Mknod(target, unix.S_IFCHR|0o000, 0)
	}
	mode := uint32(hdr.Mode) & 0o777 // setuid, setgid and sticky are dropped
	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
			return 0, os.Chmod(target, os.FileMode(mode))
		}
		os.RemoveAll(target)
		return 0, os.Mkdir(target, os.FileMode(mode|0o700))
	case tar.TypeReg, tar.TypeRegA:
		os.RemoveAll(target)
		return writeFile(target, tr, mode)
	case tar.TypeSymlink:
		os.RemoveAll(target)
		return 0, os.Symlink(hdr.Linkname, target)
	case tar.TypeLink:
		return 0, hardlink(dir, hdr.Linkname, target)
	}
	// Device nodes, FIFOs and anything else: a job's /dev comes from the
	// runner, never from an image.
	return 0, nil
}

// validWhiteout says whether the name a whiteout hides is one entry of its
// directory, as every other name of the layer must be.
func validWhiteout(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func writeFile(target string, r io.Reader, mode uint32) (int64, error) {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, os.Chmod(target, os.FileMode(mode))
}

// hardlink links target to another entry of the same layer; links to
// anything outside the layer are refused.
func hardlink(dir, linkname, target string) error {
	rel, ok := cleanEntry(linkname)
	if !ok || rel == "" {
		return fmt.Errorf("%w: hardlink to %q leaves the layer", errCorrupt, linkname)
	}
	parent, base := path.Split(rel)
	pdir, err := safeParent(dir, strings.TrimSuffix(parent, "/"))
	if err != nil {
		return fmt.Errorf("%w: hardlink to %q: %v", errCorrupt, linkname, err)
	}
	src := filepath.Join(pdir, base)
	fi, err := os.Lstat(src)
	if err != nil || fi.IsDir() {
		return fmt.Errorf("%w: hardlink to %q, which the layer does not hold as a file", errCorrupt, linkname)
	}
	os.RemoveAll(target)
	return os.Link(src, target)
}

// safeMkdirAll creates rel's directories below dir, refusing to pass
// through anything that is not a real directory.
func safeMkdirAll(dir, rel string) (string, error) {
	cur := dir
	if rel == "" {
		return cur, nil
	}
	for _, seg := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&os.ModeSymlink != 0:
			return "", fmt.Errorf("%w: %s is a symlink in the path of a later entry", errCorrupt, cur)
		case !fi.IsDir():
			os.Remove(cur)
			if err := os.Mkdir(cur, 0o755); err != nil {
				return "", err
			}
		}
	}
	return cur, nil
}

// safeParent checks that rel's directories below dir exist and are real
// directories.
func safeParent(dir, rel string) (string, error) {
	cur := dir
	if rel == "" {
		return cur, nil
	}
	for _, seg := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s is not a directory", cur)
		}
	}
	return cur, nil
}
