package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
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
		Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd,
	}}
	for i, l := range layers {
		ld, err := l.Digest()
		if err != nil {
			return nil, err
		}
		p := PullProgress{Image: image, Layer: ld.String(), Index: i + 1, Count: len(layers)}
		if n, err := l.Size(); err == nil {
			p.Size = n
		}
		size, err := c.ensureLayer(image, l, p)
		if err != nil {
			return nil, err
		}
		rec.Layers = append(rec.Layers, ld.String())
		rec.LayerSizes = append(rec.LayerSizes, size)
	}
	return rec, nil
}

// ensureLayer unpacks one layer unless the cache has it; the unpack goes to
// a temporary directory renamed into place only once complete and verified.
func (c *Cache) ensureLayer(image string, l v1.Layer, p PullProgress) (int64, error) {
	digest := p.Layer
	dir := c.layerDir(digest)
	if b, err := os.ReadFile(dir + ".size"); err == nil {
		if _, err := os.Stat(dir); err == nil {
			var n int64
			fmt.Sscan(string(b), &n)
			p.Done, p.Cached = true, true
			c.progress(p)
			return n, nil
		}
	}
	tmp, err := os.MkdirTemp(c.cfg.Dir+"/tmp", "layer-")
	if err != nil {
		return 0, err
	}
	defer removeTree(tmp)
	rc, err := l.Compressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	pr := &progressReader{r: rc, c: c, p: p}
	size, err := unpackLayer(verifyErrors{pr}, digest, tmp)
	if errors.Is(err, errCorrupt) {
		return 0, &PullError{Image: image, Kind: KindCorrupt, Err: err}
	}
	if err != nil {
		return 0, fmt.Errorf("unpack layer %s: %w", digest, err)
	}
	if err := c.writeAtomic(dir+".size", []byte(fmt.Sprint(size))); err != nil {
		return 0, err
	}
	if err := c.ownTree(tmp); err != nil {
		return 0, fmt.Errorf("give layer %s to the cache's owner: %w", digest, err)
	}
	removeTree(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return 0, err
	}
	pr.p.Done = true
	c.progress(pr.p)
	return size, nil
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
