package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
)

func newSubmitCmd() *cobra.Command {
	var (
		conn    connFlags
		wait    bool
		timeout string
		envs    []string
		suspend bool
		resume  string
		asJSON  bool
		image   string
		svcs    []string
		raw     bool
	)
	cmd := &cobra.Command{
		Use:   "submit [flags] -- SCRIPT",
		Short: "Queue a job and print its ID (--wait: stream its log and exit with its exit code)",
		Long: `Queue a job on the berth server and print its ID on stdout.

SCRIPT runs with sh on an instance; several arguments are joined with spaces,
and "-" reads the script from stdin. Put -- before the script so that its own
flags are not taken for berth's.

With --wait the job's log streams to stdout and berth exits with the job's
exit code; a job that failed without one (lost instance, timeout, cancel)
exits 1 with the reason on stderr.

--env NAME=VALUE sets a variable; --env NAME passes NAME's value from berth's
own environment, which keeps secrets out of shell history.

--image REF runs the script with that image as its root file system (GitLab's
image:), --service REF[=ALIAS] starts a sibling container (services:).`,
		Example: `  berth submit -- 'make test'
  berth submit --wait --timeout 20m --env GOFLAGS=-race -- 'go test ./...'
  berth submit --wait --suspend -- 'make deps'      # prints "environment key: KEY" on stderr
  berth submit --wait --resume KEY -- 'make test'   # runs on that environment
  berth submit - < ci.sh
  berth submit --wait --image golang:1.22 -- 'go version'`,
		Args: needScript,
		RunE: func(cmd *cobra.Command, args []string) error {
			script := strings.Join(args, " ")
			if len(args) == 1 && args[0] == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read the script from stdin: %w", err)
				}
				script = string(b)
			}
			if strings.TrimSpace(script) == "" {
				return errors.New("the script is empty: give the commands to run after --, e.g. berth submit -- 'make test'")
			}
			env, err := parseEnvFlags(envs)
			if err != nil {
				return err
			}
			req := api.JobRequest{Script: script, Env: env, Timeout: timeout, Suspend: suspend, Resume: resume}
			req.Image, req.Services = imageFlags(image, svcs)
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			job, err := c.Submit(ctx, req)
			if err != nil {
				return fmt.Errorf("submit job: %w", err)
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if !wait {
				if asJSON {
					if err := jsonOut(stdout, job); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(stdout, job.ID)
				}
				if suspend {
					fmt.Fprintf(stderr, "berth: the environment key appears once job %s ends: see `berth jobs %s`\n", job.ID, job.ID)
				}
				return nil
			}
			logTo := stdout
			if asJSON {
				logTo = stderr
			}
			if !raw {
				logTo = &terminalSafe{w: logTo}
			}
			return waitForJob(ctx, c, job.ID, suspend, asJSON, logTo, stdout, stderr)
		},
	}
	f := cmd.Flags()
	conn.add(cmd)
	f.BoolVar(&wait, "wait", false, "stream the job's log to stdout and exit with its exit code")
	f.StringVar(&timeout, "timeout", "", "kill the job after this long, e.g. 90s, 10m, 2h (default: the server's)")
	f.StringArrayVar(&envs, "env", nil, "set NAME=VALUE for the script, or pass NAME from this environment (repeatable)")
	f.BoolVar(&suspend, "suspend", false, "park the job's environment when it ends and report its key")
	f.StringVar(&resume, "resume", "", "run on the parked environment with this key")
	f.StringVar(&image, "image", "", "run the script in this OCI image (e.g. golang:1.22, registry:5000/team/app@sha256:...)")
	f.StringArrayVar(&svcs, "service", nil, "start a service container from REF[=ALIAS] beside the job (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print the job as JSON (with --wait: the final job on stdout, the log on stderr)")
	f.BoolVar(&raw, "raw", false, "with --wait: pass the log's terminal escape sequences through (by default only colours pass)")
	return cmd
}

// needScript refuses a submit without a script, saying what to write
// (cobra's own "requires at least 1 arg(s)" does not).
func needScript(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return nil
	}
	return errors.New("no script to run: write the job's commands after --, e.g.\n" +
		"  berth submit --wait -- 'echo hello from $(hostname)'\n" +
		"or read them from a file with\n" +
		"  berth submit --wait - < ci.sh")
}

// waitForJob follows the log until the job ends and turns the outcome into
// the command's result: nil, a jobExitError carrying the script's code, or
// an error with the reason (exit 1).
func waitForJob(ctx context.Context, c *api.Client, id string, suspend, asJSON bool, logTo, stdout, stderr io.Writer) error {
	sayCtx, stopSaying := context.WithCancel(ctx)
	said := make(chan struct{})
	go func() { sayWhyItWaits(sayCtx, c, id, stderr); close(said) }()
	err := c.Log(ctx, id, true, logTo)
	stopSaying()
	<-said
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting; job %s goes on: follow it with `berth logs %s --follow` or stop it with `berth jobs --cancel %s`", id, id, id)
		}
		return err
	}
	job, err := c.Job(ctx, id)
	if err != nil {
		return fmt.Errorf("job %s: read its result: %w", id, err)
	}
	if !job.State.Done() {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting; job %s goes on: follow it with `berth logs %s --follow`", id, id)
		}
		return fmt.Errorf("the log stream of job %s ended while the job is %s (did the server stop?): follow it with `berth logs %s --follow`", id, job.State, id)
	}
	if asJSON {
		if err := jsonOut(stdout, job); err != nil {
			return err
		}
	}
	if suspend {
		if job.EnvKey != "" {
			fmt.Fprintf(stderr, "environment key: %s\n", job.EnvKey)
		} else {
			fmt.Fprintf(stderr, "berth: job %s ended without a parked environment\n", id)
		}
	}
	return jobOutcome(job)
}

// waitReasonPoll is how often `submit --wait` asks why a queued job waits:
// the log says nothing until the job starts, and a job that waits for
// max_instances should say so within a few seconds.
const waitReasonPoll = 2 * time.Second

// sayWhyItWaits prints to stderr, once per change, why job id is still
// queued (the API's waiting_detail), until it starts or ctx ends.
func sayWhyItWaits(ctx context.Context, c *api.Client, id string, stderr io.Writer) {
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(waitReasonPoll):
		}
		job, err := c.Job(ctx, id)
		if err != nil || job.State != api.JobQueued {
			return
		}
		if job.WaitingDetail != "" && job.WaitingFor != last {
			last = job.WaitingFor
			fmt.Fprintf(stderr, "berth: job %s waits: %s\n", id, job.WaitingDetail)
		}
	}
}

// jobOutcome maps a finished job onto the process result.
func jobOutcome(job api.Job) error {
	switch {
	case job.State == api.JobSuccess:
		return nil
	case job.State == api.JobFailed && job.ExitCode != nil && *job.ExitCode != 0:
		return &jobExitError{id: job.ID, code: *job.ExitCode, reason: job.Reason}
	case job.State == api.JobCanceled:
		return fmt.Errorf("job %s was canceled%s", job.ID, reasonSuffix(job.Reason))
	default:
		kind := job.Failure
		if kind == "" {
			kind = string(job.State)
		}
		return fmt.Errorf("job %s failed (%s)%s", job.ID, strings.ReplaceAll(kind, "_", " "), reasonSuffix(job.Reason))
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// jobExitError makes berth exit with the job's exit code (see exitCoder in
// main.go), so `berth submit --wait` can stand in for the script in a shell.
type jobExitError struct {
	id     string
	code   int
	reason string
}

func (e *jobExitError) Error() string {
	if e.reason != "" {
		return fmt.Sprintf("job %s failed: %s", e.id, e.reason)
	}
	return fmt.Sprintf("job %s failed: the script exited with code %d", e.id, e.code)
}

// ExitCode is the script's exit code; codes a shell cannot report become 1.
func (e *jobExitError) ExitCode() int {
	if e.code <= 0 || e.code > 255 {
		return 1
	}
	return e.code
}

// parseEnvFlags turns --env values into the request's map. A bare NAME takes
// its value from berth's own environment.
func parseEnvFlags(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(flags))
	for _, kv := range flags {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			v, set := os.LookupEnv(name)
			if !set {
				return nil, fmt.Errorf("--env %s: %s is not set here; write --env %s=VALUE or export it first", kv, name, name)
			}
			value = v
		}
		if name == "" {
			return nil, fmt.Errorf("--env %q: the name is empty; write --env NAME=VALUE", kv)
		}
		env[name] = value
	}
	return env, nil
}
