package ha

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Two managers run Lead: A works first; when A's lease goes, A's work
// sees its context end and B's work starts; stopping B hands back to A.
func TestLeadHandsWorkOverWhenTheLeaseGoes(t *testing.T) {
	p := newPrefix(t)
	a, b := newManager(t, p, "a"), newManager(t, p, "b")
	type event struct {
		who   string
		start bool
		cause error
		lease int64
	}
	events := make(chan event, 10)
	run := func(m *manager, who string, ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() {
			done <- m.el.Lead(ctx, func(wctx context.Context, term *Term) error {
				events <- event{who: who, start: true, lease: term.Lease()}
				<-wctx.Done()
				events <- event{who: who, cause: context.Cause(wctx)}
				return nil
			})
		}()
		return done
	}
	actx, stopA := context.WithCancel(testCtx(t))
	defer stopA()
	aDone := run(a, "a", actx)
	first := <-events
	if first.who != "a" || !first.start {
		t.Fatalf("first event %+v, want a starting", first)
	}
	bctx, stopB := context.WithCancel(testCtx(t))
	defer stopB()
	bDone := run(b, "b", bctx)

	if _, err := a.cli.Revoke(testCtx(t), clientv3.LeaseID(first.lease)); err != nil {
		t.Fatal(err)
	}
	// B may start before A's client hears of the revoke (at its next
	// keepalive): that window is what the fence on every write covers.
	for range 2 {
		switch e := <-events; {
		case e.who == "a" && !e.start && errors.Is(e.cause, ErrLeaseLost):
		case e.who == "b" && e.start:
		default:
			t.Fatalf("after revoking a's lease: %+v, want a's work stopped by ErrLeaseLost and b's started", e)
		}
	}
	stopB()
	if e := <-events; e.who != "b" || e.start || !errors.Is(e.cause, context.Canceled) {
		t.Fatalf("after stopping b: %+v", e)
	}
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("b's Lead returned %v", err)
	}
	if e := <-events; e.who != "a" || !e.start {
		t.Fatalf("after b stopped: %+v, want a leading again", e)
	}
	stopA()
	<-events
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's Lead returned %v", err)
	}
}
