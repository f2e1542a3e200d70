package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// newJobsQuarantinedCmd is `berth jobs quarantined`: the jobs the queue
// set aside as damaged, with the copy that holds their last good record.
func newJobsQuarantinedCmd() *cobra.Command {
	var (
		conn   connFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "quarantined",
		Short: "List the jobs set aside as damaged, and where their last good copy is",
		Long: `A job whose record berth finds damaged is set aside (quarantined) so that the
others go on; the last good copy of the queue is kept beside queue.db as
queue.db.good-TIME. This lists them (admin token). With berth stopped,
` + "`berth state restore-job ID`" + ` puts a job back from its kept copy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/api/v1/jobs/quarantined", nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+c.Token)
			resp, err := c.HTTP.Do(req)
			if err != nil {
				return fmt.Errorf("cannot reach berth at %s: %w", c.BaseURL, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				var e api.Error
				json.NewDecoder(resp.Body).Decode(&e)
				return fmt.Errorf("GET /api/v1/jobs/quarantined: %d %s", resp.StatusCode, e.Message)
			}
			var list queue.QuarantinedList
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				return fmt.Errorf("decode the quarantined jobs: %w", err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return jsonOut(out, list)
			}
			if len(list.Jobs) == 0 {
				fmt.Fprintln(out, "no job is quarantined")
				return nil
			}
			return printQuarantined(out, list.Jobs)
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for machines")
	return cmd
}

// printQuarantined prints one line per job set aside.
func printQuarantined(out interface{ Write([]byte) (int, error) }, jobs []queue.Quarantined) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSET ASIDE\tKEPT COPY\tREASON")
	for _, j := range jobs {
		kept := j.Kept
		if kept == "" {
			kept = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, j.At.UTC().Format(time.RFC3339), kept, j.Reason)
	}
	return tw.Flush()
}
