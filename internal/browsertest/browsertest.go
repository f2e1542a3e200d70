// Package browsertest starts Debian's chromium headless for tests that
// drive berth's web console through github.com/chromedp/chromedp.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ScreenshotDirEnv names a directory to write page screenshots to (docs/
// holds the ones made so); unset, Screenshot writes nothing.
const ScreenshotDirEnv = "BERTH_CONSOLE_SCREENSHOTS"

// New starts chromium with a throw-away profile and returns a tab's
// context, ended when the test ends. Without chromium the test is skipped:
// .ci/run installs it.
func New(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium; .ci/run does): the console's browser tests need it")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	if os.Geteuid() == 0 { // chromium refuses to run as root with its sandbox
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// SignIn signs in to the console at base through its login form.
func SignIn(ctx context.Context, base, token string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#page-fleet")),
	)
}

// WaitFor polls a JavaScript predicate in the page for up to 90 s.
func WaitFor(ctx context.Context, what, js string) error {
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// BodyText is the page's text, for failure messages.
func BodyText(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	return s
}

// Screenshot writes a PNG of the window to
// $BERTH_CONSOLE_SCREENSHOTS/console-NAME.png when that is set.
func Screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(ScreenshotDirEnv)
	if dir == "" {
		return
	}
	chromedp.Do(ctx, chromedp.Sleep(700*time.Millisecond)) // let the charts draw
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot of %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}
