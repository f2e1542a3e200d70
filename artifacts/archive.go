package artifacts

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// ErrCorrupt is returned (wrapped) for an archive that cannot be read.
var ErrCorrupt = errors.New("archive is corrupt")

// Stats counts what an archive holds.
type Stats struct {
	Files int
	Bytes int64
	// Name is the file's base name, for the raw format.
	Name string
}

// ErrRawNotOne is returned (wrapped) when a raw artifact's paths match
// other than exactly one file: the raw format is the file itself.
var ErrRawNotOne = errors.New("the raw artifact format holds exactly one file")

// TarToZip reads the tar stream the instance sent and writes it as a zip,
// GitLab's artifacts archive and cache.zip format. Directories and symlinks
// keep their modes.
func TarToZip(r io.Reader, w io.Writer) (Stats, error) {
	var st Stats
	tr := tar.NewReader(r)
	zw := zip.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read the files sent by the instance: %w", err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		fh := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: h.ModTime}
		fh.SetMode(h.FileInfo().Mode())
		switch h.Typeflag {
		case tar.TypeDir:
			fh.Name += "/"
			fh.Method = zip.Store
			if _, err := zw.CreateHeader(fh); err != nil {
				return st, err
			}
		case tar.TypeSymlink:
			fw, err := zw.CreateHeader(fh)
			if err != nil {
				return st, err
			}
			if _, err := io.WriteString(fw, h.Linkname); err != nil {
				return st, err
			}
		case tar.TypeReg:
			fw, err := zw.CreateHeader(fh)
			if err != nil {
				return st, err
			}
			n, err := io.Copy(fw, tr)
			if err != nil {
				return st, fmt.Errorf("read %s from the instance: %w", name, err)
			}
			st.Files++
			st.Bytes += n
		}
	}
	return st, zw.Close()
}

// TarToGzip writes each regular file of the tar stream as one gzip member
// named after it: GitLab's "gzip" artifact format (reports such as junit).
func TarToGzip(r io.Reader, w io.Writer) (Stats, error) {
	var st Stats
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("read the files sent by the instance: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		gw := gzip.NewWriter(w)
		gw.Name, gw.ModTime = strings.TrimPrefix(path.Clean(h.Name), "./"), h.ModTime
		n, err := io.Copy(gw, tr)
		if err != nil {
			return st, err
		}
		if err := gw.Close(); err != nil {
			return st, err
		}
		st.Files++
		st.Bytes += n
	}
}

// TarToRaw writes the one regular file of the tar stream as it is: GitLab's
// "raw" artifact format (reports such as codequality, sast, dast, terraform).
// GitLab Runner refuses more than one file; so does this.
func TarToRaw(r io.Reader, w io.Writer) (Stats, error) {
	var st Stats
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			if st.Files == 0 {
				return st, fmt.Errorf("%w: no file matched", ErrRawNotOne)
			}
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("read the files sent by the instance: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if st.Files == 1 {
			return st, fmt.Errorf("%w: both %s and %s matched; name one file in the report's paths", ErrRawNotOne, st.Name, path.Base(h.Name))
		}
		n, err := io.Copy(w, tr)
		if err != nil {
			return st, err
		}
		st.Files, st.Bytes, st.Name = 1, n, path.Base(h.Name)
	}
}

// ZipToTar checks a zip archive and writes it as a tar stream for the
// instance to extract. An entry or symlink that would land outside the
// extraction directory is refused (ErrEscapes) before anything is written
// for it; an unreadable archive is ErrCorrupt.
func ZipToTar(ra io.ReaderAt, size int64, w io.Writer) (Stats, error) {
	var st Stats
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return st, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	tw := tar.NewWriter(w)
	links := archiveLinks{}
	for _, f := range zr.File {
		name, err := safeName(f.Name)
		if err != nil {
			return st, err
		}
		mode := f.Mode()
		if mode&fs.ModeSymlink == 0 {
			if err := links.check(name, "", false); err != nil {
				return st, err
			}
		}
		h := &tar.Header{Name: name, Mode: int64(mode.Perm()), ModTime: f.Modified}
		switch {
		case mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return st, err
			}
		case mode&fs.ModeSymlink != 0:
			target, err := readSmall(f)
			if err != nil {
				return st, err
			}
			if err := safeLink(name, target); err != nil {
				return st, err
			}
			if err := links.check(name, target, true); err != nil {
				return st, err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			if err := tw.WriteHeader(h); err != nil {
				return st, err
			}
		case mode.IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, int64(f.UncompressedSize64)
			if err := tw.WriteHeader(h); err != nil {
				return st, err
			}
			rc, err := f.Open()
			if err != nil {
				return st, fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Name, err)
			}
			n, err := io.Copy(tw, rc)
			rc.Close()
			if err != nil {
				return st, fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Name, err)
			}
			st.Files++
			st.Bytes += n
		}
	}
	return st, tw.Close()
}

func safeName(name string) (string, error) {
	c := path.Clean(strings.ReplaceAll(name, "\\", "/"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", fmt.Errorf("%w: archive entry %q", ErrEscapes, name)
	}
	return c, nil
}

func safeLink(name, target string) error {
	if path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %s points to the absolute path %s", ErrEscapes, name, target)
	}
	if _, err := safeName(path.Join(path.Dir(name), target)); err != nil {
		return fmt.Errorf("%w: symlink %s points to %s", ErrEscapes, name, target)
	}
	return nil
}

func readSmall(f *zip.File) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCorrupt, f.Name, err)
	}
	return string(b), nil
}
