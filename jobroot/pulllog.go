package jobroot

import (
	"fmt"
	"io"
	"time"

	"github.com/berth-ci/berth/images"
)

// PullLog writes an image pull to a job's log: "Pulling image X" when the
// pull starts; then, once the pull has taken longer than Quiet, a line for
// each layer as it completes and one every Every for a layer still
// downloading. A fast pull stays one line (and "Pulled image" after it);
// a slow one shows that it moves and how far.
type PullLog struct {
	// W is the job's log.
	W io.Writer
	// Where is added to the first line ("on the host"); "" adds nothing.
	Where string
	// Quiet is how long a pull runs before layers get lines; Every how
	// often a downloading layer gets one.
	Quiet, Every time.Duration
	// Now is the clock (time.Now; tests set their own).
	Now func() time.Time

	start, last time.Time
}

// NewPullLog is a PullLog with the defaults: layers get lines after 2 s,
// a downloading layer every 5 s.
func NewPullLog(w io.Writer, where string) *PullLog {
	return &PullLog{W: w, Where: where, Quiet: 2 * time.Second, Every: 5 * time.Second, Now: time.Now}
}

// Event is an images.Config.Progress callback.
func (l *PullLog) Event(p images.PullProgress) {
	now := l.Now()
	if p.Layer == "" {
		l.start, l.last = now, time.Time{}
		where := ""
		if l.Where != "" {
			where = " " + l.Where
		}
		fmt.Fprintf(l.W, "Pulling image %s%s\n", p.Image, where)
		return
	}
	if p.Cached || now.Sub(l.start) < l.Quiet {
		return
	}
	switch {
	case p.Done:
		fmt.Fprintf(l.W, "  layer %d/%d %s: done, %s\n", p.Index, p.Count, shortDigest(p.Layer), megabytes(p.Read))
	case now.Sub(l.last) >= l.Every:
		of := ""
		if p.Size > 0 {
			of = " of " + megabytes(p.Size)
		}
		fmt.Fprintf(l.W, "  layer %d/%d %s: %s%s\n", p.Index, p.Count, shortDigest(p.Layer), megabytes(p.Read), of)
	default:
		return
	}
	l.last = now
}

func shortDigest(d string) string {
	if i := len("sha256:"); len(d) > i+12 && d[:i] == "sha256:" {
		return d[i : i+12]
	}
	return d
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
