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
// matches within one path segment and "**" across segments.
func Allowed(image string, ref name.Reference, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	full := ref.Name()
	for _, g := range globs {
		if globMatch(g, image) || globMatch(g, full) {
			return true
		}
	}
	return false
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
