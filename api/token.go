package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-ci/berth/internal/secretfile"
)

// TokenEnv is the environment variable the CLI reads the API token from
// when --token is not given.
const TokenEnv = "BERTH_TOKEN"

// TokenFileName is the file in the state directory that holds the admin API
// token. `berth run` creates it (mode 0600) when it is absent; the CLI of
// the same user reads it, so nobody has to copy a token by hand on one
// machine.
const TokenFileName = "api-token"

// TokensDirName is the directory in the state directory that holds one file
// per additional submitter: the file's name is the submitter's name, its
// content the submitter's token. See Principal.
const TokensDirName = "api-tokens"

// tokenPrefix marks berth tokens, so that secret scanners and people can
// tell one from any other random string.
const tokenPrefix = "berth_"

// NewToken returns a fresh random token: 256 bits from crypto/rand.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux (it panics instead)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// TokenPath is where the admin token of stateDir lives.
func TokenPath(stateDir string) string { return filepath.Join(stateDir, TokenFileName) }

// EnsureTokenFile returns the token in path, creating the file with a new
// token (mode 0600) when it does not exist. Creation is atomic: the token is
// written to a temporary file that is then hard-linked to path, so a reader
// never sees a half-written token and two starting daemons agree on one.
// A token file that others may read is refused, because whoever reads it
// can run jobs.
func EnsureTokenFile(path string) (string, error) {
	tok, err := ReadTokenFile(path)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tok, err = createTokenFile(path)
	if errors.Is(err, fs.ErrExist) {
		return ReadTokenFile(path) // another process won the race: use its token
	}
	return tok, err
}

// createTokenFile writes a new token to path, which must not exist (the
// error then wraps fs.ErrExist). The token goes to a temporary file first,
// which is then hard-linked to path: link never replaces a file, and
// readers see either no file or the whole token.
func createTokenFile(path string) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*") // CreateTemp makes it 0600
	if err != nil {
		return "", fmt.Errorf("create API token file %s: %w; pass a writable --state-dir", path, err)
	}
	defer os.Remove(tmp.Name())
	tok := NewToken()
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write API token file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write API token file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write API token file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("create API token file %s: %w", path, err)
	}
	return tok, nil
}

// ReadTokenFile reads a token file: one line, surrounding white space
// ignored. It refuses a file that is empty or that users other than its
// owner may read or write.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return "", fmt.Errorf("read API token %s: %w; it belongs to the user that runs `berth run`: run the command as that user, or get a token from them and pass --token or $%s", path, err, TokenEnv)
		}
		return "", fmt.Errorf("read API token %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read API token %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("API token %s is not a regular file: remove it and restart berth to create a new one", path)
	}
	if err := secretfile.CheckInfo(path, fi, "API token", "run jobs"); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("read API token %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("API token %s is empty: remove it and restart berth to create a new one", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("API token %s holds more than one line or word: write just the token", path)
	}
	return tok, nil
}

// ResolveToken picks the token a client sends: flag when set, else
// $BERTH_TOKEN, else the token file of stateDir (the daemon's default state
// directory when the caller passes that). A missing token file is not an
// error: the request then goes without a token and the server's 401 says
// how to get one. An unreadable one is.
func ResolveToken(flag, stateDir string) (string, error) {
	if t := strings.TrimSpace(flag); t != "" {
		return t, nil
	}
	if t := strings.TrimSpace(os.Getenv(TokenEnv)); t != "" {
		return t, nil
	}
	if stateDir == "" {
		return "", nil
	}
	tok, err := ReadTokenFile(TokenPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// SubmitterPath is where submitter name's token lives in stateDir.
func SubmitterPath(stateDir, name string) string {
	return filepath.Join(stateDir, TokensDirName, name)
}

// ValidSubmitterName reports whether name may name a submitter: 1 to 64
// letters, digits, '.', '_' or '-', not starting with a punctuation mark,
// and not AdminName.
func ValidSubmitterName(name string) bool {
	if name == "" || len(name) > 64 || name == AdminName {
		return false
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// AddSubmitter creates a token for a new submitter name in stateDir and
// returns it. It refuses a name that already has one, so a typo cannot
// silently replace someone's token.
func AddSubmitter(stateDir, name string) (string, error) {
	if !ValidSubmitterName(name) {
		return "", fmt.Errorf("submitter name %q: use 1 to 64 letters, digits, '.', '_' or '-' (not first), and not %q", name, AdminName)
	}
	dir := filepath.Join(stateDir, TokensDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w; pass the daemon's --state-dir and run as the user that runs `berth run`", dir, err)
	}
	path := SubmitterPath(stateDir, name)
	tok, err := createTokenFile(path)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("submitter %s already has a token (%s): remove it first with `berth token remove %s` to replace it", name, path, name)
	}
	return tok, err
}
