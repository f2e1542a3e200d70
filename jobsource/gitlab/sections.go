package gitlab

import (
	"fmt"
	"time"
)

// GitLab folds a job's log into collapsible sections marked by lines the
// runner writes: "section_start:UNIX_TIME:NAME\r\033[0K" followed by the
// header, and "section_end:UNIX_TIME:NAME\r\033[0K" (GitLab's "Custom
// collapsible sections"). berth marks its own steps (getting the sources,
// the cache, the artifacts) and the script and after_script the same way.

func sectionMark(kind, name string, at time.Time) string {
	return fmt.Sprintf("section_%s:%d:%s\r\033[0K", kind, at.Unix(), name)
}

// sectionStart opens a section of berth's own in the log, with its header.
func (j *Job) sectionStart(name, header string) {
	j.writeLine(sectionMark("start", name, time.Now()) + "\033[36;1m" + header + "\033[0;m")
}

// sectionEnd closes it.
func (j *Job) sectionEnd(name string) {
	j.writeLine(sectionMark("end", name, time.Now()))
}

// sectionLine is shell code that opens (kind "start", with header) or
// closes (kind "end") a section from the script, with the instance's clock.
func sectionLine(kind, name, header string) string {
	if kind == "end" {
		return `printf 'section_end:%s:` + name + `\r\033[0K\n' "$(date +%s)"` + "\n"
	}
	return `printf 'section_start:%s:` + name + `\r\033[0K\033[36;1m%s\033[0;m\n' "$(date +%s)" ` + shellQuote(header) + "\n"
}
