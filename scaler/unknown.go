package scaler

import "github.com/berth-ci/berth/provider"

// ReasonReplacedUnknown deletes an instance the provider listed running
// that berth has no record of (a previous process's, or one a lost store
// forgot), on a provider that cannot reset it but whose instances are
// disposable (Config.Disposable): an unknown job may have left its
// processes and files there, and a fresh instance costs only a boot.
const ReasonReplacedUnknown Reason = "replaced_unknown"

// adoptRunning decides the fate of in, an instance the provider lists
// running that no request of berth's accounts for. Nothing says what ran
// there, so it takes no job as it is, in this order of preference:
//
//   - reset it, where the caller can (Config.ResetAdopted): the instance is
//     kept and nothing of the unknown job survives;
//   - else delete it, where instances are disposable (Config.Disposable):
//     the Decrease frees its place under max_instances, and the scaling
//     that follows every listing boots a fresh one if demand wants it;
//   - else adopt it idle as it is, without running the hook again: a
//     provider whose instances are neither resettable nor replaceable (a
//     fixed list of hosts) leaves berth nothing better
//     (docs/limitations.md).
func (s *Scaler) adoptRunning(in *instance) {
	in.provState = provider.StateRunning
	switch {
	case s.cfg.ResetAdopted:
		s.startReset(in)
	case s.cfg.Disposable:
		s.setPhase(in, phaseBooting)
		s.deleteInstance(in, ReasonReplacedUnknown)
	default:
		s.setPhase(in, phaseBooting)
		s.makeReady(in)
	}
}
