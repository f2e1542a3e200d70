package jobroot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// A service's health check, as GitLab Runner's docker executor does it:
// after the services start, the job waits until each answers on the TCP
// ports its image exposes (or on HEALTHCHECK_TCP_PORT alone, when the
// service's variables set it), at most wait_for_services_timeout (30 s by
// default). A service that does not answer is a warning with its log, not
// a failure: the job may not need it yet.

// startedService is a service that was started, with what its health
// check needs.
type startedService struct {
	svc    Service
	ports  []string
	log    *serviceLog
	exited <-chan struct{} // closed when the service's init has ended
}

// defaultServicesTimeout is GitLab Runner's wait_for_services_timeout.
const defaultServicesTimeout = 30 * time.Second

func servicesTimeout(s Settings) time.Duration {
	if s.ServicesTimeout == 0 {
		return defaultServicesTimeout
	}
	return time.Duration(s.ServicesTimeout) * time.Second
}

// healthPorts are the TCP ports to wait for: HEALTHCHECK_TCP_PORT when the
// service's environment sets it, else the image's exposed TCP ports.
func healthPorts(env []string, exposed []string) []string {
	if p := envValue(env, "HEALTHCHECK_TCP_PORT"); p != "" {
		return []string{p}
	}
	var ports []string
	for _, e := range exposed {
		port, proto, _ := strings.Cut(e, "/")
		if proto == "" || proto == "tcp" {
			ports = append(ports, port)
		}
	}
	return ports
}

// waitForServices waits, for all services at once, until each answers on
// its ports or the timeout passes, and warns in the job's log about each
// that did not.
func waitForServices(ctx context.Context, started []startedService, timeout time.Duration, log io.Writer) {
	if timeout < 0 {
		return
	}
	var waiting []startedService
	for _, s := range started {
		if len(s.ports) > 0 {
			waiting = append(waiting, s)
		}
	}
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintf(log, "Waiting for services to be up and running (timeout %d seconds)...\n", int(timeout.Seconds()))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(waiting))
	var wg sync.WaitGroup
	for i, s := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = waitPorts(ctx, s.ports, timeout, s.exited)
		}()
	}
	wg.Wait()
	for i, s := range waiting {
		if errs[i] != nil {
			select {
			case <-s.exited:
				s.log.wait() // a service that is gone: all it printed
			default:
			}
			fmt.Fprintf(log, "\n*** WARNING: Service %s probably didn't start properly.\n\nHealth check error:\n%v\n\nService container logs:\n%s\n*********\n\n",
				s.svc.Image, errs[i], s.log.tail())
		}
	}
}

// waitPorts dials each port on the instance's loopback until it answers,
// or the service is gone (its init ended), or the timeout passes.
func waitPorts(ctx context.Context, ports []string, timeout time.Duration, gone <-chan struct{}) error {
	for _, port := range ports {
		addr := net.JoinHostPort("127.0.0.1", port)
		for {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("service did not answer on port %s within %s (last: %v); the job goes on", port, timeout, err)
			case <-gone:
				return fmt.Errorf("service exited before it answered on port %s; the job goes on", port)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// serviceLog reads a service's output: it keeps the last part for a
// failed health check and, with CI_DEBUG_SERVICES, copies each line into
// the job's log as "[service:NAME] line", as GitLab Runner does.
type serviceLog struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{}
}

// serviceLogMax bounds the part of a service's output kept for warnings.
const serviceLogMax = 16 << 10

func newServiceLog(r *os.File, log io.Writer, name string, debug bool) *serviceLog {
	l := &serviceLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer r.Close()
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				l.add(line)
				if debug {
					fmt.Fprintf(log, "[service:%s] %s", name, strings.TrimSuffix(line, "\n")+"\n")
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

func (l *serviceLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, s...)
	if len(l.buf) > serviceLogMax {
		l.buf = append([]byte(nil), l.buf[len(l.buf)-serviceLogMax:]...)
	}
}

// tail is the service's output so far, or a note that there is none.
func (l *serviceLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return "(the service printed nothing)"
	}
	return strings.TrimSuffix(string(l.buf), "\n")
}

// wait returns once the service's output has ended (its processes are
// gone).
func (l *serviceLog) wait() { <-l.done }

// envValue is name's value in a KEY=VALUE list, the last one winning.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// envTrue says whether name is set to a true value ("true", "1").
func envTrue(env []string, name string) bool {
	switch strings.ToLower(envValue(env, name)) {
	case "true", "1", "yes":
		return true
	}
	return false
}
