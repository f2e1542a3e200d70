package scaler

// Shutdown stops scale-up for good and deletes every instance that holds no
// job or environment, for delete_instances_on_shutdown. Without the stop, the
// next decision would refill the idle pool the deletions just emptied and
// leave an instance behind when berth exits (issue 9).
func (s *Scaler) Shutdown(reason Reason) {
	s.stopped = true
	s.snapshotLearned(true) // saved at stop (learned.go)
	s.DeleteAll(reason)
}

// StopScaleUp stops scale-up for good without deleting anything: berth is
// stopping and waits for running jobs, so an instance that vanishes now is
// not replaced and the idle pool is not refilled; booting one would leave a
// machine that nobody uses once berth exits.
// The learned state is snapshotted for the save that follows (learned.go).
func (s *Scaler) StopScaleUp() {
	s.stopped = true
	s.snapshotLearned(true)
}
