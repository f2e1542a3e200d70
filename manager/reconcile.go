package manager

import (
	"encoding/json"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/scaler"
)

// sourceName names the source a job came from, for envState.
func (m *Manager) sourceName(job jobsource.Job) string {
	if _, ok := job.(*queue.Job); ok {
		return m.queue.Name()
	}
	return ""
}

// reconcileParked closes the kill -9 window after a suspend: the
// environment is parked (its key committed to state.db) before the job's
// record in queue.db gets the key, so a berth killed in between left a
// parked environment no job named, and the job that succeeded was failed
// at the next start. The environment's saved state names its job and
// result: a queue job that Open failed for the restart, or that TakeOver
// failed for a failover (under [ha], each term), gets them back.
func (m *Manager) reconcileParked(envs []scaler.EnvRecord, jobs []api.Job) {
	interrupted := map[string]bool{}
	for _, j := range jobs {
		interrupted[j.ID] = true
	}
	for _, e := range envs {
		var st envState
		if e.Lost != "" || e.ResumedBy != "" || json.Unmarshal(e.State, &st) != nil || st.Source != m.queue.Name() || !interrupted[st.Job] {
			continue
		}
		r := jobsource.Result{ExitCode: st.ExitCode, Failure: jobsource.FailureKind(st.Failure), Message: st.Message, Instance: e.InstanceID, EnvKey: e.Key}
		if _, err := m.queue.RecoverResult(st.Job, r); err != nil {
			m.log.Error("cannot recover the result of a job whose environment was parked", "job", st.Job, "env_key", e.Key, "err", err)
		}
	}
}
