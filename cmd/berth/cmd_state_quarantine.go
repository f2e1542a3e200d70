package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/jobsource/queue"
)

// reportQuarantined prints the jobs queue.db holds set aside (issue 32:
// check said ok while a job's only good copy was about to be replaced)
// and returns how many; nothing when berth holds the file.
func reportQuarantined(out io.Writer, stateDir string) int {
	dir := filepath.Join(stateDir, "queue")
	if !exists(filepath.Join(dir, "queue.db")) {
		return 0
	}
	jobs, err := queue.ReadQuarantined(dir)
	if err != nil {
		fmt.Fprintf(out, "in use   quarantined jobs not read (%v): `berth jobs quarantined` asks the running berth\n", err)
		return 0
	}
	for _, j := range jobs {
		kept := "no copy was kept"
		if j.Kept != "" {
			kept = "last good copy in " + filepath.Join(dir, j.Kept)
		}
		fmt.Fprintf(out, "QUARANTINED job %s (set aside %s): %s; %s\n", j.ID, j.At.UTC().Format("2006-01-02 15:04:05Z"), j.Reason, kept)
	}
	return len(jobs)
}

// newRestoreJobCmd is `berth state restore-job ID`.
func newRestoreJobCmd(dir func() (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "restore-job ID",
		Short: "Put a quarantined job back from its kept copy (berth must be stopped)",
		Long: `A job whose record berth found damaged was set aside, and the last good copy of
the queue kept as queue/queue.db.good-TIME. restore-job reads the job from that
copy and puts it back: a queued job is queued again, one that was running is
recorded failed (its run ended with that berth). berth must be stopped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := dir()
			if err != nil {
				return err
			}
			state, err := queue.RestoreQuarantined(filepath.Join(d, "queue"), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored job %s (%s) from its kept copy\n", args[0], state)
			return nil
		},
	}
}
