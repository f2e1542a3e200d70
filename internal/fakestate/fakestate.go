// Package fakestate keeps a fake cloud's state in a file across restarts
// of the fake (the -state flag of gcpfake, awsfake and azurefake), so
// that chaos tests can restart the cloud as well as berth.
package fakestate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/berth-ci/berth/internal/atomicfile"
)

// File is a state file and what was last written to it.
type File struct {
	Path string
	last []byte
}

// Save writes v as JSON when it differs from what was last saved or
// loaded, atomically: a temporary file renamed over the old one, so a
// crash (a kill -9 of the fake) leaves the old state or the new one.
func (f *File) Save(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if bytes.Equal(b, f.last) {
		return nil
	}
	if err := atomicfile.Write(f.Path, b, 0o600); err != nil {
		return err
	}
	f.last = b
	return nil
}

// Load reads the file into v; it reports false, and no error, when the
// file does not exist yet (a new cloud).
func (f *File) Load(v any) (bool, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("state file %s: %w; remove it to start a new cloud", f.Path, err)
	}
	f.last = b
	return true, nil
}
