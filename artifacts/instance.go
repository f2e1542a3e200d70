package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Shell runs a short script on the job's instance with stdin and stdout
// streamed (the executor's SSH connection); stderr is returned in errors.
type Shell interface {
	Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (exitCode int, stderr string, err error)
}

// Spec says which files to pack: GitLab's paths, exclude and untracked.
type Spec struct {
	Paths     []string
	Exclude   []string
	Untracked bool
}

// Format is an archive format GitLab knows.
type Format string

// Formats.
const (
	Zip  Format = "zip"
	Gzip Format = "gzip"
	Raw  Format = "raw"
)

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// listScript prints every entry under dir as "d PATH\0" or "f PATH\0",
// leaving out .git; POSIX find and printf only.
func listScript(dir string) string {
	return "cd " + quote(dir) + " 2>/dev/null || exit 0\n" +
		`find . -mindepth 1 -path ./.git -prune -o -type d -exec printf 'd %s\000' {} +` + "\n" +
		`find . -mindepth 1 -path ./.git -prune -o ! -type d -exec printf 'f %s\000' {} +` + "\n"
}

// untrackedScript lists the files git does not track under dir.
func untrackedScript(dir string) string {
	return "cd " + quote(dir) + " 2>/dev/null || exit 0\n" +
		"command -v git >/dev/null 2>&1 || { echo 'untracked: git is not installed on the instance' >&2; exit 3; }\n" +
		"git ls-files -o -z\n"
}

// List returns the entries under dir on the instance.
func List(ctx context.Context, sh Shell, dir string) ([]Entry, error) {
	var out bytes.Buffer
	code, stderr, err := sh.Stream(ctx, listScript(dir), nil, &out)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("list the files in %s: exit %d: %s", dir, code, stderr)
	}
	var es []Entry
	for _, rec := range strings.Split(out.String(), "\x00") {
		kind, p, ok := strings.Cut(rec, " ")
		if !ok {
			continue
		}
		es = append(es, Entry{Path: strings.TrimPrefix(p, "./"), Dir: kind == "d"})
	}
	return es, nil
}

// Pick returns the paths under dir that spec selects.
func Pick(ctx context.Context, sh Shell, dir string, spec Spec) ([]string, error) {
	// Refuse escaping patterns before touching the instance.
	if _, err := cleanAll(append(append([]string(nil), spec.Paths...), spec.Exclude...), dir); err != nil {
		return nil, err
	}
	es, err := List(ctx, sh, dir)
	if err != nil {
		return nil, err
	}
	var untracked []string
	if spec.Untracked {
		var out bytes.Buffer
		code, stderr, err := sh.Stream(ctx, untrackedScript(dir), nil, &out)
		if err != nil {
			return nil, err
		}
		if code != 0 {
			return nil, fmt.Errorf("list untracked files in %s: exit %d: %s", dir, code, stderr)
		}
		for _, p := range strings.Split(out.String(), "\x00") {
			if p != "" {
				untracked = append(untracked, p)
			}
		}
	}
	return Select(es, spec.Paths, spec.Exclude, untracked, dir)
}

// Pack archives paths (relative to dir, as Pick returns them) from the
// instance into w in format f.
func Pack(ctx context.Context, sh Shell, dir string, paths []string, f Format, w io.Writer) (Stats, error) {
	pr, pw := io.Pipe()
	type res struct {
		st  Stats
		err error
	}
	done := make(chan res, 1)
	ww := &watchedWriter{w: w}
	w = ww
	go func() {
		var r res
		switch f {
		case Gzip:
			r.st, r.err = TarToGzip(pr, w)
		case Raw:
			r.st, r.err = TarToRaw(pr, w)
		default:
			r.st, r.err = TarToZip(pr, w)
		}
		if r.err != nil {
			// w refused (a size limit, a full disk): stop the instance's
			// tar rather than read gigabytes for nothing.
			pr.CloseWithError(r.err)
		} else {
			_, _ = io.Copy(io.Discard, pr) // the tar's end-of-archive blocks
		}
		done <- r
	}()
	names := strings.Join(paths, "\x00")
	if names != "" {
		names += "\x00"
	}
	script := "cd " + quote(dir) + " && exec tar --no-recursion --null -T - -cf -"
	code, stderr, err := sh.Stream(ctx, script, strings.NewReader(names), pw)
	pw.Close()
	r := <-done
	if ww.err != nil {
		return r.st, ww.err // the tar failed because w did
	}
	if err != nil {
		return r.st, err
	}
	if code != 0 {
		return r.st, fmt.Errorf("pack files in %s on the instance: tar exited %d: %s", dir, code, strings.TrimSpace(stderr))
	}
	return r.st, r.err
}

// watchedWriter keeps the first error its writer returned, so that Pack
// reports why it stopped rather than the broken pipe that follows.
type watchedWriter struct {
	w   io.Writer
	err error
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// Unpack extracts the zip archive in ra into dir on the instance. The
// archive is checked whole first (a refused archive writes nothing), then
// converted again as it streams to the instance: an archive of gigabytes
// costs a second decompression, not its size in memory.
func Unpack(ctx context.Context, sh Shell, dir string, ra io.ReaderAt, size int64) (Stats, error) {
	st, err := ZipToTar(ra, size, io.Discard)
	if err != nil {
		return st, err
	}
	pr, pw := io.Pipe()
	converted := make(chan struct{})
	go func() {
		_, err := ZipToTar(ra, size, pw)
		pw.CloseWithError(err)
		close(converted)
	}()
	script := "mkdir -p " + quote(dir) + " && cd " + quote(dir) + " && exec tar -xf -"
	code, stderr, err := sh.Stream(ctx, script, pr, io.Discard)
	pr.CloseWithError(errors.New("the instance stopped reading")) // ends the conversion if tar quit early
	<-converted
	if err != nil {
		return st, err
	}
	if code != 0 {
		return st, fmt.Errorf("extract into %s on the instance: tar exited %d: %s", dir, code, strings.TrimSpace(stderr))
	}
	return st, nil
}
