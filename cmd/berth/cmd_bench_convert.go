package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/bench"
)

// newBenchConvertCmd is `berth bench convert`: turn public or exported job
// histories into the CSV that `berth bench --trace` replays.
func newBenchConvertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "convert google2011|gitlab [flags] FILE...",
		Short: "Turn a job history into a bench trace (CSV arrival_unix_s,duration_s)",
		Long: `Turn a job history into the CSV that berth bench --trace replays, written to
stdout or --output. docs/bench.md describes the CSV and where to get the inputs.`,
	}
	cmd.AddCommand(newConvertGoogleCmd(), newConvertGitLabCmd())
	return cmd
}

func newConvertGoogleCmd() *cobra.Command {
	var (
		start   string
		hours   float64
		perTask bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "google2011 [--start TIME --hours H] [--per-task] [-o FILE] PART...",
		Short: "Convert job_events or task_events of Google's clusterdata-2011-2 trace",
		Long: `Convert the job_events (or task_events) part files of Google's 2011 cluster
trace (gs://clusterdata-2011-2, CC-BY 4.0) into a bench trace. PART files may
be gzipped as Google ships them; "-" reads stdin. A job arrives at its first
SUBMIT and runs from its first SCHEDULE to its last FINISH, FAIL, KILL or LOST;
jobs that never end inside the trace or run under a second are left out.`,
		Example: `  berth bench convert google2011 --start 2011-05-16T04:00:00Z --hours 168 \
    job_events/part-*-of-00500.csv.gz -o google2011_2011-05-16_7d_jobs.csv`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var from, to time.Time
			if start != "" {
				t, err := time.Parse(time.RFC3339, start)
				if err != nil {
					return fmt.Errorf("--start %q: want an RFC 3339 time such as 2011-05-16T04:00:00Z", start)
				}
				from = t
			}
			if hours < 0 {
				return errors.New("--hours must not be negative")
			}
			if hours > 0 {
				if from.IsZero() {
					return errors.New("--hours needs --start")
				}
				to = from.Add(time.Duration(hours * float64(time.Hour)))
			}
			g := &bench.Google2011{PerTask: perTask}
			for _, name := range args {
				if err := readInput(cmd, name, func(r io.Reader) error { return g.Read(r, name) }); err != nil {
					return err
				}
			}
			jobs, st := g.Jobs(from, to)
			unit := "jobs"
			if perTask {
				unit = "tasks"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "read %d events of %d %s; %d arrive in the window, kept %d (dropped: %d never ended in the trace, %d ran under 1s; %d submitted before the trace began); ended by %s\n",
				st.Rows, st.Units, unit, st.InWindow, st.Kept, st.NoEnd, st.Short, st.SubmittedBeforeTrace, endTypesText(st.EndTypes))
			if len(jobs) == 0 {
				return errors.New("no job to write: check the window (--start, --hours) against the trace's dates, May 2011")
			}
			return writeTraceTo(cmd, output, jobs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&start, "start", "", "keep jobs submitted at or after this time (RFC 3339)")
	f.Float64Var(&hours, "hours", 0, "keep jobs submitted within this many hours of --start (0: to the end)")
	f.BoolVar(&perTask, "per-task", false, "task_events only: one trace job per task instead of per job")
	f.StringVarP(&output, "output", "o", "", "write the CSV here instead of stdout")
	return cmd
}

func newConvertGitLabCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "gitlab [-o FILE] JOBS.json...",
		Short: "Convert job lists saved from GitLab's jobs API",
		Long: `Convert job lists saved from GitLab's jobs API (GET /projects/:id/jobs, page
after page in one file is fine) into a bench trace. A job arrives when it became
pending (started_at - queued_duration; created_at on GitLab versions without
queued_duration) and runs from started_at to finished_at. Jobs that never
started or still run are left out. "-" reads stdin.`,
		Example: `  berth bench convert gitlab jobs.json -o my-ci.csv`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var all []bench.Job
			var total bench.GitLabStats
			for _, name := range args {
				err := readInput(cmd, name, func(r io.Reader) error {
					jobs, st, err := bench.ReadGitLabJobs(r)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					all = append(all, jobs...)
					total.Read += st.Read
					total.Kept += st.Kept
					total.Duplicates += st.Duplicates
					total.NotRun += st.NotRun
					total.FromCreatedAt += st.FromCreatedAt
					return nil
				})
				if err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "read %d jobs, kept %d (dropped: %d never ran or still run, %d listed twice); %d arrive at created_at for want of queued_duration\n",
				total.Read, total.Kept, total.NotRun, total.Duplicates, total.FromCreatedAt)
			if len(all) == 0 {
				return errors.New("no finished job to write: export jobs that ran (scope[]=success&scope[]=failed)")
			}
			// Files may come in any order; the trace wants arrival order.
			sort.SliceStable(all, func(i, j int) bool { return all[i].Arrival.Before(all[j].Arrival) })
			return writeTraceTo(cmd, output, all)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the CSV here instead of stdout")
	return cmd
}

// readInput opens name ("-" for stdin), ungzips it when it starts with
// gzip's magic bytes, and hands it to read.
func readInput(cmd *cobra.Command, name string, read func(io.Reader) error) error {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer zr.Close()
		return read(zr)
	}
	return read(br)
}

// writeTraceTo writes jobs as CSV to stdout, or to path through a temporary
// file renamed into place, so that a failed run never leaves half a trace.
func writeTraceTo(cmd *cobra.Command, path string, jobs []bench.Job) error {
	if path == "" {
		return bench.WriteTrace(cmd.OutOrStdout(), jobs)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := bench.WriteTrace(tmp, jobs); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { // CreateTemp makes it 0600
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d jobs to %s\n", len(jobs), path)
	return nil
}

// endTypesText lists the end events of the kept jobs, most frequent first.
func endTypesText(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
