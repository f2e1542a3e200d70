package ha

import (
	"context"
	"errors"
)

// Lead runs work once per term this manager wins, until ctx ends: the
// shape of a manager that leads, loses its lease, waits as a standby and
// leads again. work's context ends when the term ends (lease lost) or ctx
// does; work must stop acting on the fleet then and return. After work
// returns, Lead resigns, so a standby takes over at once. An error from
// work ends Lead with it; otherwise Lead returns ctx's error.
func (e *Elector) Lead(ctx context.Context, work func(ctx context.Context, t *Term) error) error {
	for {
		term, err := e.Campaign(ctx)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithCancelCause(term.Context())
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		werr := work(wctx, term)
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultOpTimeout)
		if rerr := term.Resign(rctx); rerr != nil && !errors.Is(context.Cause(term.Context()), ErrLeaseLost) {
			e.log.Warn("resign after the work ended", "err", rerr)
		}
		rcancel()
		if werr != nil {
			return werr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.log.Info("standing by: campaigning for the next term")
	}
}
