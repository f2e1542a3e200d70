package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// errInsecure marks a request that would have gone over plain HTTP to a
// registry not listed as insecure.
var errInsecure = errors.New("the registry answers only over plain HTTP")

// httpsOnly refuses plain-HTTP requests to registries not listed.
// go-containerregistry falls back to HTTP by itself for loopback and
// private addresses; berth allows that only for listed registries.
type httpsOnly struct {
	next     http.RoundTripper
	insecure []string
}

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !slices.Contains(h.insecure, req.URL.Host) {
		return nil, fmt.Errorf("%w: %s", errInsecure, req.URL.Host)
	}
	return h.next.RoundTrip(req)
}

// pull fetches the linux/amd64 manifest of image and unpacks the layers the
// cache lacks.
func (c *Cache) pull(ctx context.Context, image string, creds []Credential) (*record, error) {
	ref, err := c.parseForPull(image)
	if err != nil {
		return nil, err
	}
	c.progress(PullProgress{Image: image})
	img, err := c.fetch(ctx, image, ref, creds)
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	if rec, err := c.readRecord(digest.String()); err == nil {
		return rec, nil // the tag moved to an image we already have
	}
	rec, err := c.unpackImage(image, img)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(rec)
	return rec, c.writeAtomic(c.recordPath(rec.Digest), b)
}

// parseForPull marks listed registries insecure so that they are reached
// over HTTP when they do not speak HTTPS.
func (c *Cache) parseForPull(image string) (name.Reference, error) {
	ref, err := ParseRef(image)
	if err != nil {
		return nil, err
	}
	if slices.Contains(c.cfg.Insecure, ref.Context().RegistryStr()) {
		return name.ParseReference(image, name.Insecure)
	}
	return ref, nil
}

// fetch resolves the reference to one linux/amd64 image.
func (c *Cache) fetch(ctx context.Context, image string, ref name.Reference, creds []Credential) (v1.Image, error) {
	next := c.cfg.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	if c.cfg.RefusePrivate {
		var err error
		if next, err = guardTransport(next, append(slices.Clone(c.cfg.Private), c.cfg.Insecure...)); err != nil {
			return nil, err
		}
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(c.keychain(creds)),
		remote.WithTransport(httpsOnly{next: next, insecure: c.cfg.Insecure}),
	}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if (cf.OS != "" && cf.OS != "linux") || (cf.Architecture != "" && cf.Architecture != "amd64") {
			return nil, &PullError{Image: image, Kind: KindNoPlatform, Err: fmt.Errorf("the image is for %s/%s", cf.OS, cf.Architecture)}
		}
		return img, nil
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" {
			return idx.Image(d.Digest)
		}
		have = append(have, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	return nil, &PullError{Image: image, Kind: KindNoPlatform, Err: fmt.Errorf("the manifest list has only %s", strings.Join(have, ", "))}
}

// keychain puts the job's own credentials before the configured keychain.
func (c *Cache) keychain(creds []Credential) authn.Keychain {
	kc := c.cfg.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	return authn.NewMultiKeychain(staticKeychain(creds), kc)
}

type staticKeychain []Credential

func (s staticKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	for _, c := range s {
		if c.Registry == r.RegistryStr() || (c.Registry == "docker.io" && r.RegistryStr() == name.DefaultRegistry) {
			return &authn.Basic{Username: c.Username, Password: c.Password}, nil
		}
	}
	return authn.Anonymous, nil
}

// unpackImage unpacks the layers not yet cached and returns the record.
func (c *Cache) unpackImage(image string, img v1.Image) (*record, error) {
	digest, _ := img.Digest()
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	rec := &record{Digest: digest.String(), Config: RunConfig{
		Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
		Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd, ExposedPorts: exposedPorts(cf.Config.ExposedPorts),
	}}
	b := &budget{lim: c.cfg.Limits, dir: filepath.Join(c.cfg.Dir, "tmp")}
	var added []string
	for i, l := range layers {
		ld, err := l.Digest()
		if err != nil {
			return nil, err
		}
		p := PullProgress{Image: image, Layer: ld.String(), Index: i + 1, Count: len(layers)}
		if n, err := l.Size(); err == nil {
			p.Size = n
		}
		size, isNew, err := c.ensureLayer(image, l, p, b)
		if err != nil {
			// The layers this pull added belong to no image: a hostile
			// image must not leave its first layers behind on each try.
			for _, d := range added {
				c.removeLayer(d)
			}
			return nil, err
		}
		if isNew {
			added = append(added, ld.String())
		}
		rec.Layers = append(rec.Layers, ld.String())
		rec.LayerSizes = append(rec.LayerSizes, size)
	}
	return rec, nil
}

// removeLayer deletes an unpacked layer and its size file.
func (c *Cache) removeLayer(digest string) {
	os.Remove(c.layerDir(digest) + ".size")
	os.Remove(c.sealPath(digest))
	removeTree(c.layerDir(digest))
}

// ensureLayer unpacks one layer unless the cache has it (isNew says it did),
// within what is left of b; the unpack goes to a temporary directory
// renamed into place only once complete and verified.
func (c *Cache) ensureLayer(image string, l v1.Layer, p PullProgress, b *budget) (size int64, isNew bool, err error) {
	digest := p.Layer
	dir := c.layerDir(digest)
	if sb, err := os.ReadFile(dir + ".size"); err == nil {
		if _, err := os.Stat(dir); err == nil {
			var n int64
			fmt.Sscan(string(sb), &n)
			b.bytes += n
			p.Done, p.Cached = true, true
			c.progress(p)
			return n, false, nil
		}
	}
	declared, err := l.Size()
	if err != nil {
		return 0, false, err
	}
	if max := c.cfg.Limits.LayerBytes; max > 0 && declared > max {
		return 0, false, &PullError{Image: image, Kind: KindTooLarge, Err: fmt.Errorf("layer %s: %w", digest,
			&limitError{what: "compressed bytes in one layer (its manifest says " + fmt.Sprint(declared) + ")", limit: max, key: "max_layer_size"})}
	}
	tmp, err := os.MkdirTemp(c.cfg.Dir+"/tmp", "layer-")
	if err != nil {
		return 0, false, err
	}
	defer removeTree(tmp)
	rc, err := l.Compressed()
	if err != nil {
		return 0, false, err
	}
	defer rc.Close()
	pr := &progressReader{r: rc, c: c, p: p}
	in := &capReader{r: verifyErrors{pr}, limit: c.cfg.Limits.LayerBytes, key: "max_layer_size"}
	size, err = unpackLayer(in, digest, tmp, b)
	if err != nil {
		return 0, false, c.unpackError(image, digest, err)
	}
	if err := c.writeAtomic(dir+".size", []byte(fmt.Sprint(size))); err != nil {
		return 0, false, err
	}
	if err := c.ownTree(tmp); err != nil {
		return 0, false, fmt.Errorf("give layer %s to the cache's owner: %w", digest, err)
	}
	if err := c.seal(digest, tmp); err != nil {
		return 0, false, err
	}
	removeTree(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return 0, false, err
	}
	pr.p.Done = true
	c.progress(pr.p)
	return size, true, nil
}

// unpackError classifies a failed unpack and logs the limits behind it.
func (c *Cache) unpackError(image, digest string, err error) error {
	var le *limitError
	var re *reserveError
	switch {
	case errors.As(err, &le):
		c.log.Warn("image pull stopped at a limit", "image", image, "layer", digest, "limit", le.limit, "key", le.key)
		return &PullError{Image: image, Kind: KindTooLarge, Err: fmt.Errorf("layer %s: %w", digest, err)}
	case errors.As(err, &re):
		c.log.Warn("image pull stopped at the disk reserve", "image", image, "layer", digest, "free", re.free, "reserve", re.reserve)
		return &PullError{Image: image, Kind: KindDiskFull, Err: fmt.Errorf("layer %s: %w", digest, err)}
	case errors.Is(err, errCorrupt):
		return &PullError{Image: image, Kind: KindCorrupt, Err: err}
	}
	return fmt.Errorf("unpack layer %s: %w", digest, err)
}

// verifyErrors turns go-containerregistry's own digest check failure (its
// error type is internal) into errCorrupt.
type verifyErrors struct {
	r interface{ Read([]byte) (int, error) }
}

func (v verifyErrors) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	if err != nil && strings.HasPrefix(err.Error(), "error verifying") {
		err = fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return n, err
}

// exposedPorts lists the image's exposed ports ("5432/tcp"), sorted.
func exposedPorts(m map[string]struct{}) []string {
	var ports []string
	for p := range m {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	return ports
}
