package manager

import (
	"context"
	"errors"

	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/ha"
)

// leadership is what a job was taken under: the fleet of one term (a
// single manager has one, for ever) and the term's end. A job outlives its
// term: it runs on until it ends or the new leader resets its instance,
// but it acts on the fleet of its own term only while that term holds.
type leadership struct {
	// ctx ends with the term; never for a single manager.
	ctx   context.Context
	fleet *fleet.Fleet
	// term is nil for a single manager.
	term *ha.Term
	// mayAct confirms the term (Manager.mayAct); nil for a single manager.
	mayAct func(context.Context) error
}

// ended says whether the term is over, asking etcd when this manager has
// not noticed yet (a pause past the lease). While the term's context
// lives, the manager's current term is this one, so mayAct speaks for it.
func (l *leadership) ended(ctx context.Context) bool {
	if l.term == nil {
		return false
	}
	return l.ctx.Err() != nil || l.mayAct(context.WithoutCancel(ctx)) != nil
}

type leadershipKey struct{}

// withLeadership makes the context of the jobs taken under l.
func withLeadership(jobCtx context.Context, l *leadership) context.Context {
	return context.WithValue(jobCtx, leadershipKey{}, l)
}

// leadershipOf is the leadership a job's context carries; tests that start
// jobs without one get the manager's current fleet, for ever.
func leadershipOf(ctx context.Context, m *Manager) *leadership {
	if l, ok := ctx.Value(leadershipKey{}).(*leadership); ok {
		return l
	}
	return &leadership{ctx: context.Background(), fleet: m.fleet}
}

// errLostLead is the end of a job whose manager lost its term while the
// job ran and that did not succeed.
var errLostLead = errors.New("this berth manager lost its leadership of the fleet while the job ran (see its log), " +
	"and the job did not succeed: the new leader resets the instances of the jobs it finds running, which ends them; run the job again")

// errLostLeadFirst is the end of a job whose manager lost its term before
// the job got an instance.
const errLostLeadFirst = "this berth manager lost its leadership of the fleet before the job got an instance (see its log); run the job again"
