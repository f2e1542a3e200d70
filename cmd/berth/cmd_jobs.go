package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
)

func newJobsCmd() *cobra.Command {
	var (
		conn   connFlags
		asJSON bool
		cancel bool
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "jobs [ID]",
		Short: "List jobs, or show (or --cancel) one job",
		Long: `List the 100 most recent jobs (oldest first), or show one job in detail.
--all lists every job berth keeps, following the API's pages.

--json prints api.JobList ({"jobs": [...]}) or, with ID, one api.Job.
--cancel cancels job ID: a queued job at once, a running one is killed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if cancel {
				if len(args) != 1 {
					return fmt.Errorf("--cancel needs the job's ID: berth jobs --cancel ID")
				}
				job, err := c.Cancel(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return jsonOut(out, job)
				}
				if job.State == api.JobRunning {
					fmt.Fprintf(out, "job %s: cancel requested; it stops shortly\n", job.ID)
				} else {
					fmt.Fprintf(out, "job %s: %s\n", job.ID, job.State)
				}
				return nil
			}
			if len(args) == 1 {
				if err := typoOfSubcommand(cmd, args[0]); err != nil {
					return err
				}
				job, err := c.Job(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return jsonOut(out, job)
				}
				return printJobDetail(out, job, time.Now())
			}
			jobs, err := c.Jobs(ctx)
			if all {
				jobs, err = c.AllJobs(ctx, "")
			}
			if err != nil {
				return err
			}
			if asJSON {
				return jsonOut(out, api.JobList{Jobs: jobs})
			}
			if len(jobs) == 0 {
				fmt.Fprintln(out, "No jobs yet. Submit one with: berth submit -- 'echo hello'")
				return nil
			}
			return printJobTable(out, jobs, time.Now())
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for machines")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel job ID")
	cmd.Flags().BoolVar(&all, "all", false, "list every job, not only the 100 most recent")
	cmd.AddCommand(newPruneCmd())
	cmd.AddCommand(newJobsQuarantinedCmd()) // cmd_jobs_quarantined.go (issue 32)
	cmd.SuggestionsMinimumDistance = 2
	return cmd
}

// typoOfSubcommand refuses a word that is no job ID but a typo of one of
// the command's subcommands (berth jobs prun): asking the API for job
// "prun" would answer "no such job", which hides the typo.
func typoOfSubcommand(cmd *cobra.Command, word string) error {
	if _, err := strconv.ParseUint(word, 10, 64); err == nil {
		return nil // job IDs are numbers
	}
	if len(cmd.SuggestionsFor(word)) == 0 {
		return nil
	}
	return unknownCommand(cmd, word)
}

func printJobTable(w io.Writer, jobs []api.Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCREATED\tWAITED\tRAN\tEXIT\tINSTANCE\tREASON")
	for _, j := range jobs {
		state := string(j.State)
		if j.CancelRequested {
			state += " (canceling)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			j.ID, state, clockText(j.CreatedAt, now), shortDuration(j.QueueWait(now)), ranFor(j, now),
			exitText(j.ExitCode), orDash(j.Instance), oneLine(jobReason(j), 60))
	}
	return tw.Flush()
}

func printJobDetail(w io.Writer, j api.Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	state := string(j.State)
	if j.Failure != "" {
		state += " (" + strings.ReplaceAll(j.Failure, "_", " ") + ")"
	}
	if j.CancelRequested {
		state += ", cancel requested"
	}
	row("ID", j.ID)
	if j.Source == "gitlab" {
		row("Source", "GitLab job "+j.ExternalID)
	}
	row("State", state)
	if j.ExitCode != nil {
		row("Exit code", fmt.Sprint(*j.ExitCode))
	}
	row("Reason", j.Reason)
	if j.WaitingFor != "" {
		row("Waiting for", j.WaitingFor+": "+j.WaitingDetail)
	}
	row("Submitter", j.Owner)
	row("Instance", j.Instance)
	row("Environment key", j.EnvKey)
	row("Created", j.CreatedAt.Local().Format(time.DateTime))
	if j.StartedAt != nil {
		row("Started", fmt.Sprintf("%s (waited %s)", j.StartedAt.Local().Format(time.DateTime), shortDuration(j.QueueWait(now))))
	}
	if j.FinishedAt != nil {
		row("Finished", fmt.Sprintf("%s (ran %s)", j.FinishedAt.Local().Format(time.DateTime), ranFor(j, now)))
	}
	row("Timeout", j.Timeout)
	if j.Suspend {
		row("Suspend", "yes")
	}
	row("Resume", j.Resume)
	row("Env", strings.Join(j.EnvNames, ", "))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Script:")
	for _, line := range strings.Split(strings.TrimRight(j.Script, "\n"), "\n") {
		fmt.Fprintln(w, "  "+line)
	}
	if j.AfterScript != "" {
		fmt.Fprintln(w, "After script:")
		for _, line := range strings.Split(strings.TrimRight(j.AfterScript, "\n"), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	if j.State.Done() && j.StartedAt != nil {
		fmt.Fprintf(w, "Log: berth logs %s\n", j.ID)
	} else if j.State == api.JobRunning {
		fmt.Fprintf(w, "Log: berth logs %s --follow\n", j.ID)
	}
	return nil
}

// jobReason is the table's REASON: why a job failed, or why a queued job
// waits.
func jobReason(j api.Job) string {
	if j.Reason == "" && j.WaitingFor != "" {
		return "waiting for " + j.WaitingFor
	}
	return j.Reason
}

// Helpers shared by submit, jobs, logs and instances.

// interruptContext ends on Ctrl-C or SIGTERM, so that a command waiting on the
// server stops cleanly and can say what goes on without it.
func interruptContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func jsonOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// clockText shows a time compactly: the time of day for today, else the date too.
func clockText(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t = t.Local()
	if y, m, d := t.Date(); y == now.Local().Year() && m == now.Local().Month() && d == now.Local().Day() {
		return t.Format(time.TimeOnly)
	}
	return t.Format("2006-01-02 15:04")
}

// shortDuration rounds for reading: 850ms, 12.3s, 4m05s, 2h10m.
func shortDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func ranFor(j api.Job, now time.Time) string {
	if j.StartedAt == nil {
		return "-"
	}
	end := now
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	}
	return shortDuration(end.Sub(*j.StartedAt))
}

func exitText(code *int) string {
	if code == nil {
		return "-"
	}
	return fmt.Sprint(*code)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-3]) + "..."
	}
	return s
}
