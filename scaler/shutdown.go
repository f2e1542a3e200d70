package scaler

// Shutdown stops scale-up for good and deletes every instance that holds no
// job or environment, for delete_instances_on_shutdown. Without the stop, the
// next decision would refill the idle pool the deletions just emptied and
// leave an instance behind when berth exits (issue 9).
func (s *Scaler) Shutdown(reason Reason) {
	s.stopped = true
	s.DeleteAll(reason)
}
