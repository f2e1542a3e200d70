package gitlab

// gitlab-runner numbers the jobs it runs at once: CI_CONCURRENT_ID is the
// lowest number no other running job of the runner holds, and
// CI_CONCURRENT_PROJECT_ID the lowest no other running job of the same
// project holds. Jobs use them to share a directory per slot (a cache, a
// database) without two jobs touching it at once. berth numbers the jobs
// of one source the same way, from taking a job until its Finish.

// jobSlot is a running job's two numbers.
type jobSlot struct {
	project    int64
	concurrent int
	inProject  int
}

// takeSlot gives job id of project the lowest free numbers.
func (s *Source) takeSlot(id, project int64) (concurrent, inProject int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = map[int64]jobSlot{}
	}
	usedAll, usedProject := map[int]bool{}, map[int]bool{}
	for _, sl := range s.slots {
		usedAll[sl.concurrent] = true
		if sl.project == project {
			usedProject[sl.inProject] = true
		}
	}
	for usedAll[concurrent] {
		concurrent++
	}
	for usedProject[inProject] {
		inProject++
	}
	s.slots[id] = jobSlot{project: project, concurrent: concurrent, inProject: inProject}
	return concurrent, inProject
}
