package providertest

import (
	"context"

	"github.com/berth-ci/berth/provider"
)

// leftovers counts what recycle's first job leaves behind: its background
// process and its files in /tmp and the home directory.
const leftovers = `echo procs=$(sleepers)
echo files=$(ls /tmp/berth-conformance-left $HOME/berth-conformance-left 2>/dev/null | wc -l)`

// sleepers defines a shell function that counts the processes running
// exactly "sleep 4711" (not the shell whose script mentions it).
const sleepers = `sleepers() { for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 4711 $'; }
`

// recycle checks a provider that claims Capabilities.Recycle: a job leaves
// a background process and files behind, Recycle returns, and the next
// login finds none of them while the instance still serves SSH. The
// manager relies on this between two jobs on one instance.
func (s *suite) recycle(t T) {
	r, ok := s.g.(provider.Recycler)
	if !ok {
		t.Fatalf("Info.Capabilities.Recycle is true but %T does not implement provider.Recycler", s.g)
	}
	ctx := context.Background()
	id := s.ids[0]
	ci, err := s.g.ConnectInfo(ctx, id)
	if err != nil {
		t.Fatalf("ConnectInfo(%s): %v", id, err)
	}
	run := func(what, cmd string) string {
		res, err := Exec(ctx, ci, cmd, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s on %s: %v (exit %d, stderr %q)", what, id, err, res.ExitCode, res.Stderr)
		}
		return res.Stdout
	}
	got := run("the job that leaves things behind", sleepers+`nohup sleep 4711 </dev/null >/dev/null 2>&1 &
i=0; while [ "$(sleepers)" = 0 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo left > /tmp/berth-conformance-left; echo left > $HOME/berth-conformance-left
`+leftovers)
	if got != "procs=1\nfiles=2\n" {
		t.Fatalf("the first job on %s counted %q of what it left; want procs=1 files=2 (a background sleep, two files)", id, got)
	}
	if err := r.Recycle(ctx, id); err != nil {
		t.Fatalf("Recycle(%s): %v", id, err)
	}
	if got := run("the job after Recycle", sleepers+leftovers); got != "procs=0\nfiles=0\n" {
		t.Errorf("after Recycle(%s) the next job found %q of what the first left; want procs=0 files=0", id, got)
	}
}
