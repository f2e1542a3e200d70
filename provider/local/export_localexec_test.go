//go:build linux

package local

import (
	"context"
	"time"

	"github.com/berth-ci/berth/internal/localexec"
)

// PingLocal pings instance id's init process through its exec socket, as
// Heartbeat does; ok is false when p holds no socket to it.
func PingLocal(p *Provider, id string) (ok bool, err error) {
	m, err := p.existing(id)
	if err != nil {
		return false, err
	}
	h := p.localExec(id, m)
	if h == nil {
		return false, nil
	}
	return true, askLocal(context.Background(), h, localexec.OpPing, 10*time.Second)
}
