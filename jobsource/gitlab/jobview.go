package gitlab

import "strings"

// What `berth jobs gitlab-N` and `berth logs gitlab-N` show of a job: the
// job's own script (as GitLab sent it, not the wrapper berth runs on the
// instance) and its log as GitLab receives it (masked, capped at
// OutputLimit).

// UserScript is the job's script: lines, then its after_script: lines
// after a blank line when it has any, as written in .gitlab-ci.yml.
func (j *Job) UserScript() (script, afterScript string) {
	for _, s := range j.p.Steps {
		switch s.Name {
		case "script":
			script = strings.Join(s.Script, "\n")
		case "after_script":
			afterScript = strings.Join(s.Script, "\n")
		}
	}
	return script, afterScript
}

// LogSince returns a copy of the job's log from byte offset on, masked as
// GitLab gets it, and whether the log is complete (Finish has run).
func (j *Job) LogSince(offset int) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if offset < 0 || offset > len(j.buf) {
		offset = len(j.buf)
	}
	return append([]byte(nil), j.buf[offset:]...), j.closed
}

// WebURL is the job's page in GitLab (CI_JOB_URL), where its full log
// stays; "" when GitLab sent none.
func (j *Job) WebURL() string {
	return lastValue(j.p.Variables, "CI_JOB_URL")
}
