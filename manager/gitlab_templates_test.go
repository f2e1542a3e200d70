package manager

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/internal/imagetest"
)

// Jobs shaped like GitLab's CI templates (issue 41) run end to end: the
// fake GitLab hands them to an in-process berth, which runs them on real
// sandboxes, in the instance's shell and in a busybox image. Each case
// checks what the script (and after_script) prints; the file is
// testdata/gitlab_templates, its format is described at its top.
func TestGitLabTemplatesShell(t *testing.T) { runTemplates(t, false) }

// The same jobs in an image: berth fetches outside it, the job sees the
// same variables inside it. Cases marked shell need git in the job's own
// environment, which the busybox image lacks.
func TestGitLabTemplatesImage(t *testing.T) { runTemplates(t, true) }

func runTemplates(t *testing.T, inImage bool) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	fileRepo, sha := gitlabfake.Repo(t)
	repo := fake.HTTPRepo(fileRepo)
	img, imagesConfig := "", ""
	if inImage {
		host := imagetest.Registry(t)
		img = imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
		imagesConfig = fmt.Sprintf("[images]\ninsecure_registries = [%q]\n", host)
	}
	const builds = "/berth/ci-builds"
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
builds_dir = %q
[autoscaler]
max_instances = 1
[autoscaler.provider_config]
network = "host"
host_paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"]
[[autoscaler.policy]]
idle_count = 1
%s`, fake.URL(), builds, imagesConfig))

	datadriven.RunTest(t, "testdata/gitlab_templates", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "job" {
			t.Fatalf("%s: unknown directive %q", d.Pos, d.Cmd)
		}
		if inImage && d.HasArg("shell") {
			return d.Expected // this case does not run in an image
		}
		spec := parseTemplateJob(t, d)
		spec.RepoURL, spec.Ref, spec.Sha, spec.ProjectID, spec.Image = repo, "main", sha, 41, img
		id := fake.AddJob(spec)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := fake.WaitAllDone(ctx); err != nil {
			t.Fatalf("%s: job %d did not finish: %v", d.Pos, id, err)
		}
		trace := fake.Job(id).Trace()
		if st := fake.Job(id).ReportedState(); st != "success" {
			t.Logf("%s: job %d %s (%s):\n%s", d.Pos, id, st, fake.Job(id).FailureReason(), trace)
		}
		for _, secret := range []string{fake.Job(id).Token()} {
			if strings.Contains(trace, secret) {
				t.Errorf("%s: the job token is in the trace:\n%s", d.Pos, trace)
			}
		}
		project := fmt.Sprintf("%s/%d/git/%s", builds, id, strings.TrimSuffix(repo[strings.LastIndex(repo, "/")+1:], ".git"))
		return scriptOutput(trace, map[string]string{project: "<project>", builds: "<builds>", fmt.Sprint(id): "<id>", sha: "<sha>"})
	})
}

// parseTemplateJob reads a case (mask=(P1,P2) is GitLab's
// token_mask_prefixes): "variables:" then one variable per line,
// KEY=VALUE, prefixed with "file ", "raw " or "masked " as needed (\n in a
// file's value is a newline); "script:" and "after_script:" then one
// command per line.
func parseTemplateJob(t *testing.T, d *datadriven.TestData) gitlabfake.JobSpec {
	var spec gitlabfake.JobSpec
	spec.Name = "job"
	for _, a := range d.CmdArgs {
		switch {
		case a.Key == "name" && len(a.Vals) == 1:
			spec.Name = a.Vals[0]
		case a.Key == "mask":
			spec.TokenMaskPrefixes = a.Vals
		}
	}
	section := ""
	for _, line := range strings.Split(d.Input, "\n") {
		switch line {
		case "variables:", "script:", "after_script:":
			section = line
			continue
		case "":
			continue
		}
		switch section {
		case "variables:":
			var v gitlabfake.Variable
			for {
				flag, rest, ok := strings.Cut(line, " ")
				if !ok || strings.Contains(flag, "=") {
					break
				}
				switch flag {
				case "file":
					v.File = true
				case "raw":
					v.Raw = true
				case "masked":
					v.Masked = true
				default:
					t.Fatalf("%s: unknown variable flag %q", d.Pos, flag)
				}
				line = rest
			}
			k, val, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: variable line %q is not KEY=VALUE", d.Pos, line)
			}
			if v.File {
				val = strings.ReplaceAll(val, `\n`, "\n")
			}
			v.Key, v.Value, v.Public = k, val, !v.Masked
			spec.Variables = append(spec.Variables, v)
		case "script:":
			spec.Script = append(spec.Script, line)
		case "after_script:":
			spec.AfterScript = append(spec.AfterScript, line)
		default:
			t.Fatalf("%s: %q before variables:, script: or after_script:", d.Pos, line)
		}
	}
	return spec
}

var berthTmp = regexp.MustCompile(`\.berth-gitlab-\d+-[a-z0-9]+`)

// scriptOutput is what the job's script and after_script printed, without
// the echoed commands and section markers, with the paths and numbers
// that change from run to run replaced by names.
func scriptOutput(trace string, names map[string]string) string {
	_, rest, ok := strings.Cut(trace, ":step_script\r\033[0K")
	if !ok {
		return "no step_script section in the trace:\n" + trace
	}
	var out strings.Builder
	for _, line := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(line, "Job succeeded"):
			return out.String()
		case strings.Contains(line, "ERROR: Job failed"):
			return out.String() + "job failed: " + line + "\n"
		case strings.HasPrefix(line, "\033[32;1m$ "), strings.HasPrefix(line, "section_"), strings.HasPrefix(line, "\033[36;1m"), line == "",
			// berth's own lines when after_script starts the image again
			strings.HasPrefix(line, "Using cached image "), strings.HasPrefix(line, "Pulling image "), strings.HasPrefix(line, "  layer "):
			continue
		}
		line = berthTmp.ReplaceAllString(line, ".<tmp>")
		for _, from := range []string{"project", "builds", "id", "sha"} {
			for k, v := range names {
				if v == "<"+from+">" {
					line = strings.ReplaceAll(line, k, v)
				}
			}
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}
