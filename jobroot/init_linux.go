package jobroot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-ci/berth/images"
)

// initSpec is what the runner tells the job's init through a pipe.
type initSpec struct {
	Image    string   `json:"image"`
	LayerDir string   `json:"layer_dir"` // the directory holding the layers
	Lower    []string `json:"lower"`     // layer names in LayerDir, top first
	Upper    string   `json:"upper"`
	Work     string   `json:"work"`
	Root     string   `json:"root"`
	Binds    []Bind   `json:"binds,omitempty"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir"`
	Argv     []string `json:"argv"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Hostname string   `json:"hostname"`
	Hosts    string   `json:"hosts"`
	Resolv   []byte   `json:"resolv,omitempty"`
	// Nest starts the command in a nested user and mount namespace under
	// HardenMounts (see Mounts).
	Nest bool `json:"nest,omitempty"`
	// ports are the image's exposed ports, for a service's health check.
	ports []string
}

// idMaps are the job's user namespace maps.
type idMaps struct {
	uid, gid  []syscall.SysProcIDMap
	setgroups bool
}

// buildInit works out the job's command, user and namespaces.
func buildInit(spec Spec, im *images.Image, job *jobDir, log io.Writer) (initSpec, idMaps, error) {
	is := initSpec{
		Image: spec.Image, Upper: filepath.Join(job.path, "upper"), Work: filepath.Join(job.path, "work"),
		Root: filepath.Join(job.path, "root"), Binds: spec.Binds, Hostname: spec.Hostname,
		Nest: Mounts != nil && Mounts() && HardenMounts != nil,
	}
	if is.Hostname == "" {
		is.Hostname = "berth-job"
	}
	is.Hosts = fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n", is.Hostname)
	if len(spec.Hosts) > 0 {
		is.Hosts += "127.0.0.1\t" + strings.Join(spec.Hosts, " ") + "\n"
	}
	is.Resolv, _ = os.ReadFile("/etc/resolv.conf")
	for i := len(im.LayerDirs) - 1; i >= 0; i-- {
		is.LayerDir = filepath.Dir(im.LayerDirs[i])
		is.Lower = append(is.Lower, filepath.Base(im.LayerDirs[i]))
	}
	is.Env = mergeEnv(im.Config.Env, spec.Env)
	is.ports = im.Config.ExposedPorts
	is.Dir = spec.Dir
	if is.Dir == "" {
		is.Dir = im.Config.WorkingDir
	}
	if is.Dir == "" {
		is.Dir = "/"
	}
	entry := im.Config.Entrypoint
	if spec.Entrypoint != nil {
		entry = spec.Entrypoint
		if len(entry) == 1 && entry[0] == "" {
			entry = nil
		}
	}
	cmd := spec.Command
	if cmd == nil {
		cmd = im.Config.Cmd // Docker's rule: the entrypoint gets the image's Cmd
	}
	is.Argv = append(append([]string{}, entry...), cmd...)
	if len(is.Argv) == 0 {
		return is, idMaps{}, errors.New("nothing to run: no command, entrypoint or image Cmd")
	}
	maps, err := jobMaps()
	if err != nil {
		return is, maps, err
	}
	user := im.Config.User
	if spec.User != "" {
		user = spec.User
	}
	is.UID, is.GID, err = imageUser(im, user, maps, log)
	if !hasEnv(is.Env, "HOME") {
		// As Docker does: the user's home from the image, else /root.
		is.Env = append(is.Env, "HOME="+homeOf(readImageFile(im.LayerDirs, "etc/passwd"), is.UID))
	}
	return is, maps, err
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// homeOf is uid's home directory in a passwd file, or /root.
func homeOf(passwd []byte, uid int) string {
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 6 && f[2] == fmt.Sprint(uid) && f[5] != "" {
			return f[5]
		}
	}
	return "/root"
}

// mergeEnv puts the job's variables over the image's.
func mergeEnv(image, job []string) []string {
	var out []string
	seen := map[string]int{}
	for _, kv := range append(append([]string{}, image...), job...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := seen[k]; ok {
			out[i] = kv
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	if _, ok := seen["PATH"]; !ok {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return out
}

// jobMaps maps the runner's own IDs into the job's user namespace. In the
// initial namespace the runner's user becomes the job's root (and only ID);
// inside a user namespace that maps a range (the local sandbox), every ID
// of it maps to itself, so images may switch users.
func jobMaps() (idMaps, error) {
	uidMap, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return idMaps{}, err
	}
	initial := strings.Fields(string(uidMap))
	if len(initial) == 3 && initial[0] == "0" && initial[1] == "0" && initial[2] == "4294967295" || os.Geteuid() != 0 {
		return idMaps{
			uid: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			gid: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}, nil
	}
	// A namespace whose setgroups is denied (an unprivileged sandbox)
	// cannot allow it again below itself.
	sg, err := os.ReadFile("/proc/self/setgroups")
	if err != nil {
		return idMaps{}, err
	}
	m := idMaps{setgroups: strings.TrimSpace(string(sg)) == "allow"}
	if m.uid, err = identity("/proc/self/uid_map"); err != nil {
		return m, err
	}
	m.gid, err = identity("/proc/self/gid_map")
	return m, err
}

func identity(file string) ([]syscall.SysProcIDMap, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var m []syscall.SysProcIDMap
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var in, out, n int
		if _, err := fmt.Sscan(line, &in, &out, &n); err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		m = append(m, syscall.SysProcIDMap{ContainerID: in, HostID: in, Size: n})
	}
	return m, nil
}

// imageUser resolves a user of the image ("name", "uid", "uid:gid")
// against its /etc/passwd. A user the job's namespace cannot map runs as
// root there (the job's root has no privilege on the instance).
func imageUser(im *images.Image, u string, maps idMaps, log io.Writer) (int, int, error) {
	if u == "" {
		return 0, 0, nil
	}
	name, group, _ := strings.Cut(u, ":")
	uid, gid, ok := lookupID(readImageFile(im.LayerDirs, "etc/passwd"), name)
	if !ok {
		n, err := atoi(name)
		if err != nil {
			return 0, 0, fmt.Errorf("user %q is not in the image's /etc/passwd: name a user of the image, or a numeric uid", u)
		}
		uid, gid = n, n
	}
	if group != "" {
		if g, _, ok := lookupID(readImageFile(im.LayerDirs, "etc/group"), group); ok {
			gid = g
		} else if n, err := atoi(group); err == nil {
			gid = n
		}
	}
	if !mapped(maps.uid, uid) || !mapped(maps.gid, gid) {
		fmt.Fprintf(log, "berth: user %q is not mapped on this instance (single-ID user namespace); running as root of the job's namespace\n", u)
		return 0, 0, nil
	}
	return uid, gid, nil
}

func mapped(m []syscall.SysProcIDMap, id int) bool {
	for _, r := range m {
		if id >= r.ContainerID && id < r.ContainerID+r.Size {
			return true
		}
	}
	return false
}

// runInit is the job's init: PID 1 of its namespaces. It builds the root,
// hardens itself and executes the job's command; it never returns.
func runInit() {
	var is initSpec
	f := os.NewFile(3, "spec")
	err := json.NewDecoder(f).Decode(&is)
	f.Close()
	if err == nil && Harden == nil {
		err = fmt.Errorf("this berth binary has no seccomp filter linked in")
	}
	if err == nil {
		err = setupRoot(is)
	}
	if err == nil {
		err = enterJob(is)
	}
	os.Exit(reportSetup(is.Image, "runner_system_failure", fmt.Errorf("image %q: start the job: %w", is.Image, err)))
}
