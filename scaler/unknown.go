package scaler

import "github.com/berth-ci/berth/provider"

// ReasonReplacedUnknown deletes an instance the provider listed running (or
// suspended with what ran there) that berth has no record of (a previous
// process's, or one a lost store forgot), on a provider that cannot reset
// it but whose instances are disposable (Config.Disposable): an unknown job
// may have left its processes and files there, and a fresh instance costs
// only a boot.
const ReasonReplacedUnknown Reason = "replaced_unknown"

// replaceUnknown deletes l, an instance no record or request of berth's
// accounts for, when it may hold an unknown job's processes or files and
// berth can neither reset it nor lose anything by deleting it; it reports
// whether it did. The Decrease frees its place under max_instances, and
// the scaling that follows every listing boots a fresh one if demand wants
// it. A creating instance is left to adoption: it boots from the image,
// with nothing of anyone's on it yet.
func (s *Scaler) replaceUnknown(l Listed) bool {
	if s.cfg.ResetAdopted || !s.cfg.Disposable {
		return false
	}
	switch l.State {
	case provider.StateRunning:
	case provider.StateSuspending, provider.StateSuspended, provider.StateResuming:
		// Suspended with its processes: the tier would resume it for a job.
	default:
		return false
	}
	in := s.addInstance(l.ID, phaseBooting)
	in.provState = l.State
	s.deleteInstance(in, ReasonReplacedUnknown)
	return true
}

// adoptRunning adopts in, an instance the provider lists running that no
// request of berth's accounts for, and that replaceUnknown kept. Nothing
// says what ran there: where the caller can reset it (Config.ResetAdopted)
// it takes no booking until it was reset; otherwise (a provider whose
// instances are neither resettable nor disposable, such as a fixed list of
// hosts) it is adopted idle as it is, without running the hook again
// (docs/limitations.md).
func (s *Scaler) adoptRunning(in *instance) {
	in.provState = provider.StateRunning
	if s.cfg.ResetAdopted {
		s.startReset(in)
		return
	}
	s.setPhase(in, phaseBooting)
	s.makeReady(in)
}
