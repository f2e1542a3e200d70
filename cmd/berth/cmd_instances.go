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
	return cmd
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
