package api

import (
	"encoding/json"
	"errors"
)

// Image is the image a job runs in, in GitLab's shape: {"name": "golang:1.22",
// "entrypoint": [""]}. A plain string is read as the name.
type Image struct {
	// Name is the image reference (Docker Hub short names allowed).
	Name string `json:"name"`
	// Entrypoint overrides the image's entrypoint; [""] clears it.
	Entrypoint []string `json:"entrypoint,omitempty"`
}

// UnmarshalJSON accepts "name" as well as {"name": ...}.
func (im *Image) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*im = Image{Name: s}
		return nil
	}
	type plain Image
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New(`"image" must be a name or {"name": "...", "entrypoint": [...]}`)
	}
	*im = Image(p)
	return nil
}

// Service is a sibling container a job talks to, in GitLab's shape.
type Service struct {
	// Name is the service's image.
	Name string `json:"name"`
	// Alias is the host name the job reaches it by (besides the one
	// derived from the image name).
	Alias string `json:"alias,omitempty"`
	// Command overrides the image's Cmd.
	Command []string `json:"command,omitempty"`
	// Entrypoint overrides the image's entrypoint.
	Entrypoint []string `json:"entrypoint,omitempty"`
}

// UnmarshalJSON accepts "name" as well as {"name": ...}.
func (s *Service) UnmarshalJSON(b []byte) error {
	var n string
	if json.Unmarshal(b, &n) == nil {
		*s = Service{Name: n}
		return nil
	}
	type plain Service
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New(`a service must be a name or {"name": "...", "alias": "...", "command": [...], "entrypoint": [...]}`)
	}
	*s = Service(p)
	return nil
}
