package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
)

func newInstancesCmd() *cobra.Command {
	var (
		conn   connFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "instances",
		Short: "List the fleet's instances with their slots",
		Long: `List the instances berth manages, with their slots by state.

--json prints api.InstanceList ({"instances": [...]}).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			list, err := c.Instances(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if list == nil {
					list = []api.Instance{}
				}
				return jsonOut(out, api.InstanceList{Instances: list})
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "No instances. berth creates them when jobs arrive or the idle policy asks for some.")
				return nil
			}
			return printInstanceTable(out, list, time.Now())
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for machines")
	cmd.AddCommand(newInstancesDeleteCmd())
	return cmd
}

func newInstancesDeleteCmd() *cobra.Command {
	var (
		conn                      connFlags
		all, force, hold, release bool
		asJSON                    bool
	)
	cmd := &cobra.Command{
		Use:   "delete ID... | --all",
		Short: "Delete instances (sandboxes, VMs) berth manages",
		Long: `Delete the named instances, or --all of them, through berth's API (admin token).

The rules are berth's own: an instance that holds nothing (every slot idle,
no parked environment) is deleted at once. One that runs a job, holds a
booking of a job about to start, or holds a parked environment is kept,
and the command says why. --force deletes those too: a parked environment
is dropped (a job resuming it fails saying so), and an instance with
running jobs drains: it takes no new job and is deleted when they end.
No running job is killed; cancel it first (berth jobs ID --cancel).

Instances keep running when berth stops (the next start takes them back,
parked environments included) unless autoscaler.delete_instances_on_shutdown
is set; with berth running, ` + "`berth instances delete --all`" + ` removes
every idle one.`,
		Example: `  berth instances delete local-3f9c2a1b7e
  berth instances delete --all
  berth instances delete --all --force
  berth instances delete --all --hold     # stop at zero: no idle instance boots again
  berth instances delete --release        # the idle policy applies again`,
		Args: func(cmd *cobra.Command, args []string) error {
			if release && (all || len(args) > 0 || hold) {
				return fmt.Errorf("--release ends a --hold and deletes nothing: give it alone")
			}
			if release {
				return nil
			}
			if all == (len(args) > 0) {
				return fmt.Errorf("name the instances to delete (see berth instances) or pass --all, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			req := api.DeleteInstancesRequest{IDs: args, All: all, Force: force}
			if hold || release {
				req.Hold = &hold
			}
			res, err := c.DeleteInstances(ctx, req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return jsonOut(out, res)
			}
			if release {
				fmt.Fprintln(out, "The idle pool is released: berth keeps idle instances as its policy says.")
				return nil
			}
			if err := printDeleted(out, res.Instances, all); err != nil {
				return err
			}
			if hold {
				fmt.Fprintln(out, "The idle pool is held: no idle instance boots until `berth instances delete --release` or berth stops; jobs still run, on instances made for them.")
			}
			return nil
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "delete every instance")
	cmd.Flags().BoolVar(&force, "force", false, "also instances in use: drop parked environments, drain instances with running jobs")
	cmd.Flags().BoolVar(&hold, "hold", false, "keep no idle instance afterwards (the idle policy is paused until --release or berth stops)")
	cmd.Flags().BoolVar(&release, "release", false, "end a --hold: the idle policy applies again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for machines")
	return cmd
}

// printDeleted says what became of each instance; an unknown ID is an
// error (a typo must not pass for done).
func printDeleted(w io.Writer, list []api.DeletedInstance, all bool) error {
	if len(list) == 0 && all {
		fmt.Fprintln(w, "No instances to delete.")
		return nil
	}
	unknown := 0
	for _, d := range list {
		if d.Outcome == api.InstanceUnknown {
			unknown++
		}
		if d.Why != "" {
			fmt.Fprintf(w, "%s: %s: %s\n", d.ID, d.Outcome, d.Why)
		} else {
			fmt.Fprintf(w, "%s: %s\n", d.ID, d.Outcome)
		}
	}
	if unknown > 0 {
		return fmt.Errorf("%d of the instances named are not in berth's fleet; see berth instances", unknown)
	}
	return nil
}

func printInstanceTable(w io.Writer, list []api.Instance, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSLOTS\tUSES\tAGE\tREADY AFTER\tENV KEYS\tDELETE REASON")
	for _, in := range list {
		age := "-"
		if !in.CreatedAt.IsZero() {
			age = shortDuration(now.Sub(in.CreatedAt))
		}
		ready := "-"
		if in.ReadyAt != nil && !in.CreatedAt.IsZero() {
			ready = shortDuration(in.ReadyAt.Sub(in.CreatedAt))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n",
			in.ID, orDash(in.State), slotsText(in.Slots), in.UseCount, age, ready,
			orDash(strings.Join(in.EnvKeys, ",")), orDash(oneLine(in.DeleteReason, 50)))
	}
	return tw.Flush()
}

// slotsText lists the non-zero slot counts, e.g. "1 acquired, 1 idle", which
// reads faster than five mostly-zero columns.
func slotsText(s api.SlotCounts) string {
	var parts []string
	for _, c := range []struct {
		n    int
		name string
	}{
		{s.Acquired, "acquired"}, {s.Reserved, "reserved"}, {s.Idle, "idle"},
		{s.Suspended, "suspended"}, {s.Unavailable, "unavailable"},
	} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
