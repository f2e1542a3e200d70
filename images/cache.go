package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/sys/unix"
)

// PullPolicy says when an image is fetched from its registry.
type PullPolicy string

// The pull policies, as GitLab names them.
const (
	// PullAlways asks the registry for the tag's current manifest every
	// time; layers already cached are not downloaded again.
	PullAlways PullPolicy = "always"
	// PullIfNotPresent uses the cached image if the reference was pulled
	// before, and pulls otherwise. The default.
	PullIfNotPresent PullPolicy = "if-not-present"
	// PullNever uses only the cache and fails if the image is not in it.
	PullNever PullPolicy = "never"
)

// ParsePullPolicy checks a policy name; "" is if-not-present.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(s); p {
	case "":
		return PullIfNotPresent, nil
	case PullAlways, PullIfNotPresent, PullNever:
		return p, nil
	}
	return "", fmt.Errorf("pull_policy %q: want always, if-not-present or never", s)
}

// Config configures a Cache.
type Config struct {
	// Dir holds the cache; it is created if missing.
	Dir string
	// MaxBytes bounds the unpacked size of the cached layers; the least
	// recently used images not in use are evicted past it. 0 is no limit.
	MaxBytes int64
	// Insecure lists the registries (host:port) that may be reached over
	// plain HTTP. Every other registry must answer HTTPS.
	Insecure []string
	// Allowed holds globs an image must match; empty allows every image.
	Allowed []string
	// Policy is the pull policy; "" is if-not-present.
	Policy PullPolicy
	// Keychain finds credentials for registries the job gave none for;
	// nil means ~/.docker/config.json (authn.DefaultKeychain).
	Keychain authn.Keychain
	// Transport is the HTTP transport under the insecure check; nil is
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Logger receives one line per pull; nil is slog.Default().
	Logger *slog.Logger
	// RefusePrivate refuses registries at loopback, link-local, private
	// and other internal addresses unless Private or Insecure lists them,
	// and gives every job the same words for a registry that did not
	// answer. For pulls on berth's host for a sandbox without network:
	// an image name must not reach what the sandbox cannot.
	RefusePrivate bool
	// Private lists registries (host or host:port) allowed at internal
	// addresses under RefusePrivate.
	Private []string
	// Verify checks each cached layer against the seal written when it
	// was unpacked before this process first uses it (it reads every
	// byte once): a damaged layer is logged, removed and pulled again.
	Verify bool
	// Limits bound each pull's downloads and unpacked files.
	Limits Limits
	// Owner, when set, is given every file and directory the cache
	// creates (see Owner); nil leaves them to the calling user.
	Owner *Owner
	// Progress, when set, hears of a pull as it goes (PullProgress), on
	// the goroutine that called Get; nil hears nothing.
	Progress func(PullProgress)
}

// Credential is a registry login, as a job or the config gives it.
type Credential struct {
	// Registry is the host[:port], as in the image name ("docker.io" for
	// Docker Hub).
	Registry string
	// Username and Password are the login.
	Username, Password string
}

// Image is an image ready to be stacked into a job's root. Release it when
// the job ends so that eviction may remove it.
type Image struct {
	// Name is the reference as the job wrote it.
	Name string
	// Digest is the manifest digest of the linux/amd64 image.
	Digest string
	// LayerDirs are the unpacked layers, bottom first.
	LayerDirs []string
	// Config is the image's run configuration.
	Config RunConfig
	// Size is the bytes the image's layers take on disk.
	Size int64
	// Pulled says whether anything was downloaded for this Get.
	Pulled bool
	lock   *os.File
}

// RunConfig is the part of an image's config a job run uses.
type RunConfig struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// ExposedPorts are the image's EXPOSE ports ("5432/tcp"): a service's
	// health check waits for them.
	ExposedPorts []string `json:"exposed_ports,omitempty"`
}

// Release lets eviction remove the image again.
func (im *Image) Release() {
	if im.lock != nil {
		im.lock.Close()
		im.lock = nil
	}
}

// record is what the cache keeps per image manifest.
type record struct {
	Digest     string    `json:"digest"`
	Layers     []string  `json:"layers"`
	LayerSizes []int64   `json:"layer_sizes"`
	Config     RunConfig `json:"config"`
}

// Cache is the on-disk image cache of one instance. Several processes may
// use one directory: pulls take a file lock, running jobs a shared lock on
// their image.
type Cache struct {
	cfg Config
	log *slog.Logger
}

// Open prepares the cache directory.
func Open(cfg Config) (*Cache, error) {
	p, err := ParsePullPolicy(string(cfg.Policy))
	if err != nil {
		return nil, err
	}
	cfg.Policy = p
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Cache{cfg: cfg, log: log}
	if err := c.ensureDirs(); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	return c, nil
}

// Get makes the image ready under the cache's pull policy and returns it
// locked against eviction. Every error is a *PullError naming the image.
func (c *Cache) Get(ctx context.Context, image string, creds []Credential) (*Image, error) {
	ref, err := ParseRef(image)
	if err != nil {
		return nil, err
	}
	if !Allowed(image, ref, c.cfg.Allowed) {
		return nil, &PullError{Image: image, Kind: KindDisallowed,
			Err: fmt.Errorf("%s matches none of allowed_images %q", ref.Name(), c.cfg.Allowed)}
	}
	unlock, err := c.lockCache()
	if err != nil {
		return nil, c.classify(image, err)
	}
	defer unlock()
	c.removeLeftovers()
	start := time.Now()
	rec, pulled, err := c.resolve(ctx, image, ref.Name(), creds)
	if err == nil && c.cfg.Verify {
		if bad := c.damagedLayers(rec); len(bad) > 0 {
			for _, l := range bad {
				c.removeLayer(l)
			}
			rec, pulled, err = c.resolve(ctx, image, ref.Name(), creds)
		}
	}
	if err != nil {
		return nil, c.classify(image, err)
	}
	im, err := c.open(image, rec)
	if err != nil {
		return nil, c.classify(image, err)
	}
	im.Pulled = pulled
	c.log.Info("image ready", "image", image, "digest", rec.Digest, "layers", len(rec.Layers),
		"bytes", im.Size, "pulled", pulled, "ms", time.Since(start).Milliseconds())
	if err := c.evict(rec.Digest); err != nil {
		c.log.Warn("image cache eviction failed", "err", err)
	}
	return im, nil
}

// resolve finds the image's record in the cache or pulls it.
func (c *Cache) resolve(ctx context.Context, image, full string, creds []Credential) (*record, bool, error) {
	if c.cfg.Policy != PullAlways {
		if rec, err := c.cachedRef(full); err == nil {
			return rec, false, nil
		}
		if c.cfg.Policy == PullNever {
			return nil, false, &PullError{Image: image, Kind: KindNotCached, Err: fmt.Errorf("%s is not in the cache at %s", full, c.cfg.Dir)}
		}
	}
	rec, err := c.pull(ctx, image, creds)
	if err != nil {
		return nil, false, err
	}
	if err := c.writeAtomic(c.refPath(full), []byte(rec.Digest)); err != nil {
		return nil, false, err
	}
	return rec, true, nil
}

// cachedRef returns the record a reference was last pulled as, if all its
// layers are still there.
func (c *Cache) cachedRef(full string) (*record, error) {
	b, err := os.ReadFile(c.refPath(full))
	if err != nil {
		return nil, err
	}
	return c.readRecord(string(b))
}

func (c *Cache) readRecord(digest string) (*record, error) {
	b, err := os.ReadFile(c.recordPath(digest))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	for _, l := range rec.Layers {
		if _, err := os.Stat(c.layerDir(l)); err != nil {
			return nil, err
		}
	}
	return &rec, nil
}

// open takes the image's shared lock and marks it used now.
func (c *Cache) open(image string, rec *record) (*Image, error) {
	lf, err := c.openLock(c.recordPath(rec.Digest) + ".lock")
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_SH); err != nil {
		lf.Close()
		return nil, err
	}
	now := time.Now()
	os.Chtimes(c.recordPath(rec.Digest), now, now)
	im := &Image{Name: image, Digest: rec.Digest, Config: rec.Config, lock: lf}
	for i, l := range rec.Layers {
		im.LayerDirs = append(im.LayerDirs, c.layerDir(l))
		im.Size += rec.LayerSizes[i]
	}
	return im, nil
}

// lockCache serialises pulls and eviction between processes.
func (c *Cache) lockCache() (func(), error) {
	f, err := c.openLock(filepath.Join(c.cfg.Dir, "lock"))
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func (c *Cache) refPath(full string) string {
	sum := sha256.Sum256([]byte(full))
	return filepath.Join(c.cfg.Dir, "refs", hex.EncodeToString(sum[:]))
}

func (c *Cache) recordPath(digest string) string {
	return filepath.Join(c.cfg.Dir, "images", strings.TrimPrefix(digest, "sha256:")+".json")
}

func (c *Cache) layerDir(digest string) string {
	return filepath.Join(c.cfg.Dir, "layers", strings.TrimPrefix(digest, "sha256:"))
}

// writeAtomic writes a file through a temporary name so readers see the
// old content or the new, never a part.
func (c *Cache) writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := c.own(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// openLock opens (creating) a lock file, given to the cache's owner so
// that every user of the cache can open it for writing.
func (c *Cache) openLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := c.own(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// evict removes least recently used images, never keep and never one a job
// holds, until the layers fit MaxBytes; then layers no image uses.
func (c *Cache) evict(keep string) error {
	if c.cfg.MaxBytes <= 0 {
		return nil
	}
	recs, err := c.records()
	if err != nil {
		return err
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].used.Before(recs[j].used) })
	for total := layerTotal(recs); total > c.cfg.MaxBytes; total = layerTotal(recs) {
		i := c.evictable(recs, keep)
		if i < 0 {
			c.log.Warn("image cache over its limit but every image is in use", "bytes", total, "limit", c.cfg.MaxBytes)
			break
		}
		c.log.Info("image evicted", "digest", recs[i].Digest, "bytes", total, "limit", c.cfg.MaxBytes)
		os.Remove(c.recordPath(recs[i].Digest))
		recs = append(recs[:i], recs[i+1:]...)
	}
	return c.removeUnused(recs)
}

type usedRecord struct {
	record
	used time.Time
}

func (c *Cache) records() ([]usedRecord, error) {
	paths, err := filepath.Glob(filepath.Join(c.cfg.Dir, "images", "*.json"))
	if err != nil {
		return nil, err
	}
	var recs []usedRecord
	for _, p := range paths {
		fi, err1 := os.Stat(p)
		rec, err2 := c.readRecord("sha256:" + strings.TrimSuffix(filepath.Base(p), ".json"))
		if err1 != nil || err2 != nil {
			continue
		}
		recs = append(recs, usedRecord{*rec, fi.ModTime()})
	}
	return recs, nil
}

func layerTotal(recs []usedRecord) int64 {
	seen := map[string]bool{}
	var n int64
	for _, r := range recs {
		for i, l := range r.Layers {
			if !seen[l] {
				seen[l] = true
				n += r.LayerSizes[i]
			}
		}
	}
	return n
}

// evictable is the index of the oldest image no job holds, or -1.
func (c *Cache) evictable(recs []usedRecord, keep string) int {
	for i, r := range recs {
		if r.Digest == keep {
			continue
		}
		f, err := c.openLock(c.recordPath(r.Digest) + ".lock")
		if err != nil {
			continue
		}
		busy := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
		f.Close()
		if !busy {
			return i
		}
	}
	return -1
}

// removeLeftovers deletes what unpacks that never finished (a killed
// runner) left in tmp; the caller holds the cache lock, so no unpack runs.
func (c *Cache) removeLeftovers() {
	entries, _ := os.ReadDir(filepath.Join(c.cfg.Dir, "tmp"))
	for _, e := range entries {
		removeTree(filepath.Join(c.cfg.Dir, "tmp", e.Name()))
	}
}

// removeUnused deletes layer directories no remaining image lists.
func (c *Cache) removeUnused(recs []usedRecord) error {
	inUse := map[string]bool{}
	for _, r := range recs {
		for _, l := range r.Layers {
			inUse[strings.TrimPrefix(l, "sha256:")] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(c.cfg.Dir, "layers"))
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !inUse[strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".size"), ".seal")] {
			errs = append(errs, removeTree(filepath.Join(c.cfg.Dir, "layers", e.Name())))
		}
	}
	return errors.Join(errs...)
}

// removeTree removes a layer directory, making its directories writable
// first (layers keep the image's modes, some without the owner's w bit).
func removeTree(dir string) error {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
