package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ParseRef parses an image reference as Docker does: "golang" is
// index.docker.io/library/golang:latest, "me/app:1" is on Docker Hub,
// "registry:5000/app@sha256:..." names a digest.
func ParseRef(s string) (name.Reference, error) {
	if strings.TrimSpace(s) == "" {
		return nil, &PullError{Image: s, Kind: KindInvalid, Err: fmt.Errorf("the image name is empty")}
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, &PullError{Image: s, Kind: KindInvalid, Err: err}
	}
	return ref, nil
}

// Allowed reports whether the image may run under the allowed_images globs:
// an empty list allows every image. A glob matches either the name as the
// job wrote it or its full form (index.docker.io/library/golang:1.22); "*"
// matches within one path segment and "**" across segments. A reference
// with a digest is matched as what is pulled, repository@digest
// (golang@sha256:…): a tag written before the digest is ignored by the pull,
// so it must not be what lets the image in.
func Allowed(image string, ref name.Reference, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	forms := []string{image, ref.Name()}
	if d, ok := ref.(name.Digest); ok {
		forms = []string{shortRepo(image) + "@" + d.DigestStr(), d.Context().Name() + "@" + d.DigestStr()}
	}
	for _, g := range globs {
		for _, f := range forms {
			if globMatch(g, f) {
				return true
			}
		}
	}
	return false
}

// shortRepo is the repository as the job wrote it: image without its
// digest and tag.
func shortRepo(image string) string {
	if i := strings.LastIndex(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// globMatch matches s against a glob where "**" matches any run of
// characters, "*" any run without "/", and "?" one character but "/".
func globMatch(glob, s string) bool {
	for len(glob) > 0 {
		switch {
		case strings.HasPrefix(glob, "**"):
			rest := strings.TrimLeft(glob, "*")
			for i := len(s); i >= 0; i-- {
				if globMatch(rest, s[i:]) {
					return true
				}
			}
			return false
		case glob[0] == '*':
			rest := glob[1:]
			for i := 0; i <= len(s); i++ {
				if globMatch(rest, s[i:]) {
					return true
				}
				if i < len(s) && s[i] == '/' {
					return false
				}
			}
			return false
		case glob[0] == '?':
			if s == "" || s[0] == '/' {
				return false
			}
		default:
			if s == "" || s[0] != glob[0] {
				return false
			}
		}
		glob, s = glob[1:], s[1:]
	}
	return s == ""
}
