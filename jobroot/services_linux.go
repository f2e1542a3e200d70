package jobroot

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/berth-ci/berth/images"
)

// Services run like the job: each in its own fresh root and namespaces,
// under the same seccomp filter, but in the instance's network namespace,
// which the job shares. So a service listening on a port is reached at
// 127.0.0.1, and /etc/hosts of the job and of every service names that
// address by each service's aliases. Two jobs with services on one
// instance at once would compete for ports: GitLab's docker executor gives
// each job a network of its own, which needs privileges berth does not
// take (capacity_per_instance = 1 avoids the clash).

// serviceHosts lists the host names of the services: the alias, and the
// names GitLab derives from the image ("tutum/wordpress:4" is
// tutum-wordpress and tutum__wordpress).
func serviceHosts(svcs []Service) []string {
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] && !strings.ContainsAny(n, ": \t") {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, s := range svcs {
		for _, a := range strings.Split(s.Alias, ",") {
			add(strings.TrimSpace(a))
		}
		base := s.Image
		if i := strings.Index(base, "@"); i >= 0 {
			base = base[:i]
		}
		if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
			base = base[:i]
		}
		add(strings.ReplaceAll(base, "/", "-"))
		add(strings.ReplaceAll(base, "/", "__"))
	}
	return names
}

// startServices starts every service, then waits for their exposed ports
// (GitLab Runner's health check); stop kills them and removes their
// directories. A service that cannot start fails the job, naming it; one
// whose port stays closed gets a warning with its log, and the job goes
// on, as in GitLab Runner.
func startServices(ctx context.Context, spec Spec, log *os.File) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if len(spec.Services) == 0 {
		return stop, nil
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return stop, err
	}
	defer null.Close()
	var started []startedService
	for _, s := range spec.Services {
		if _, err := images.ParseRef(s.Image); err != nil {
			return stop, serviceErr(s, err)
		}
		ss := Spec{
			Image: s.Image, Entrypoint: s.Entrypoint, Command: s.Command, Credentials: spec.Credentials,
			Settings: spec.Settings, Hosts: spec.Hosts, Hostname: firstHost(s), Env: s.Env, User: s.User,
		}
		fmt.Fprintf(log, "Starting service %s\n", s.Image)
		pr, pw, err := os.Pipe()
		if err != nil {
			return stop, serviceErr(s, err)
		}
		out := newServiceLog(pr, log, firstHost(s), envTrue(s.Env, "CI_DEBUG_SERVICES"))
		p, is, cleanup, err := prepare(ctx, ss, null, pw, pw, log)
		pw.Close() // the service's init holds its own copy
		if err != nil {
			cleanup()
			out.wait()
			return stop, serviceErr(s, err)
		}
		exited := make(chan struct{}) // the init is PID 1: when it ends, all of the service has
		go func() {
			p.Wait()
			close(exited)
		}()
		stops = append(stops, func() {
			p.Kill()
			<-exited
			out.wait()
			cleanup()
		})
		started = append(started, startedService{svc: s, ports: healthPorts(s.Env, is.ports), log: out, exited: exited})
	}
	waitForServices(ctx, started, servicesTimeout(spec.Settings), log)
	return stop, nil
}

func firstHost(s Service) string {
	if h := serviceHosts([]Service{s}); len(h) > 0 {
		return h[0]
	}
	return ""
}

// serviceErr names the service in a setup failure.
func serviceErr(s Service, err error) error {
	if se, ok := err.(*SetupError); ok {
		return &SetupError{Image: s.Image, Reason: se.Reason, Message: "service " + se.Message}
	}
	return setupErr(s.Image, "runner_system_failure", fmt.Errorf("service: %w", err))
}
