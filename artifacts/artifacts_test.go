package artifacts

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSelect(t *testing.T) {
	es := []Entry{{"out", true}, {"out/a.txt", false}, {"out/tmp", true}, {"out/tmp/x", false},
		{"src", true}, {"src/main.go", false}, {"report.xml", false}, {"deep", true}, {"deep/er", true}, {"deep/er/r.xml", false}}
	got, err := Select(es, []string{"out/", "**/*.xml"}, []string{"out/tmp"}, nil, "/b/p")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"deep/er/r.xml", "out", "out/a.txt", "report.xml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Select = %v, want %v", got, want)
	}
	if got, _ := Select(es, nil, nil, []string{"src/main.go"}, "/b/p"); !reflect.DeepEqual(got, []string{"src/main.go"}) {
		t.Errorf("untracked: %v", got)
	}
}

func TestCleanPatternRefusesEscapes(t *testing.T) {
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", "/b/other/x"} {
		if _, err := CleanPattern(p, "/b/p"); !errors.Is(err, ErrEscapes) {
			t.Errorf("%q: %v, want ErrEscapes", p, err)
		}
	}
	for p, want := range map[string]string{"./out/": "out", "/b/p/out/*.txt": "out/*.txt", "a/../b": "b"} {
		if got, err := CleanPattern(p, "/b/p"); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", p, got, err, want)
		}
	}
}

func zipOf(t *testing.T, add func(zw *zip.Writer)) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	add(zw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestZipToTarRefusesEscapingEntriesAndLinks(t *testing.T) {
	for name, z := range map[string][]byte{
		"dot-dot":  zipOf(t, func(zw *zip.Writer) { w, _ := zw.Create("../evil"); w.Write([]byte("x")) }),
		"absolute": zipOf(t, func(zw *zip.Writer) { w, _ := zw.Create("/etc/evil"); w.Write([]byte("x")) }),
		"symlink": zipOf(t, func(zw *zip.Writer) {
			h := &zip.FileHeader{Name: "link"}
			h.SetMode(os.ModeSymlink | 0o777)
			w, _ := zw.CreateHeader(h)
			w.Write([]byte("../../etc"))
		}),
	} {
		if _, err := ZipToTar(bytes.NewReader(z), int64(len(z)), io.Discard); !errors.Is(err, ErrEscapes) {
			t.Errorf("%s: %v, want ErrEscapes", name, err)
		}
	}
	if _, err := ZipToTar(bytes.NewReader([]byte("junk")), 4, io.Discard); !errors.Is(err, ErrCorrupt) {
		t.Errorf("junk: %v, want ErrCorrupt", err)
	}
}

// localShell runs the instance-side scripts with this machine's sh.
type localShell struct{}

func (localShell) Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String(), nil
	}
	return 0, stderr.String(), err
}

// A round trip through the instance-side commands: pick, pack to zip,
// unpack elsewhere; the files arrive with their content and modes.
func TestPackUnpackRoundTrip(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "out/sub"), 0o755)
	os.WriteFile(filepath.Join(src, "out/sub/a.txt"), []byte("hello"), 0o640)
	os.WriteFile(filepath.Join(src, "out/run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "skip.txt"), []byte("no"), 0o644)
	os.Symlink("sub/a.txt", filepath.Join(src, "out/link"))
	ctx := context.Background()
	paths, err := Pick(ctx, localShell{}, src, Spec{Paths: []string{"out"}})
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	st, err := Pack(ctx, localShell{}, src, paths, Zip, &z)
	if err != nil || st.Files != 2 {
		t.Fatalf("Pack: %+v, %v", st, err)
	}
	if _, err := Unpack(ctx, localShell{}, filepath.Join(dst, "new"), bytes.NewReader(z.Bytes()), int64(z.Len())); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "new/out/sub/a.txt")); string(b) != "hello" {
		t.Errorf("a.txt = %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dst, "new/out/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "new/out/link")); err != nil || l != "sub/a.txt" {
		t.Errorf("link: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "new/skip.txt")); !os.IsNotExist(err) {
		t.Error("skip.txt was packed")
	}
}

func TestGzipReportMembers(t *testing.T) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "./r.xml", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
	tw.Write([]byte("<a>"))
	tw.Close()
	var out bytes.Buffer
	if st, err := TarToGzip(&tb, &out); err != nil || st.Files != 1 {
		t.Fatalf("%+v %v", st, err)
	}
}
