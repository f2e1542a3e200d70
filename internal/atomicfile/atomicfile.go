// Package atomicfile replaces a file so that a crash at any moment
// leaves the old content or the new one, never a part: berth's token
// file, the local provider's client key and the fake clouds' state
// files are read back after a kill -9.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data and gives it mode. The data goes to a
// temporary file beside path (the same file system, so the rename is
// atomic), is synced, and is renamed over path; the directory is then
// synced so the rename itself survives a power cut (best effort: some
// file systems refuse to sync a directory).
func Write(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := writeSynced(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// writeSynced gives f its mode and data, syncs and closes it.
func writeSynced(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
