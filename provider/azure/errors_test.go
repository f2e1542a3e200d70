package azure

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/berth-ci/berth/provider"
)

// A 5xx from Azure (here on the connection details' Get VM) is named as
// Azure's failure, transient, and neither a throttle nor a quota (issue
// 43, item 6: 21 jobs failed in 40 s on a burst of them).
func TestServerErrorIsNamed(t *testing.T) {
	g := &Group{}
	for _, status := range []int{500, 502, 503, 504} {
		err := &azcore.ResponseError{StatusCode: status, ErrorCode: "InternalServerError"}
		got := g.mapErr("get VM", err)
		if !errors.Is(got, ErrServer) || !errors.Is(got, provider.ErrTransient) || !errors.Is(got, err) ||
			!strings.Contains(got.Error(), fmt.Sprint(status)) {
			t.Errorf("mapErr(HTTP %d) = %v; want ErrServer, transient, naming the status and wrapping Azure's error", status, got)
		}
		for _, wrong := range []error{ErrThrottled, ErrQuota, provider.ErrQuota} {
			if errors.Is(got, wrong) {
				t.Errorf("mapErr(HTTP %d) = %v; it is not %v", status, got, wrong)
			}
		}
		for _, word := range []string{"rate", "quota", "reached"} {
			if strings.Contains(strings.ToLower(got.Error()), word) {
				t.Errorf("mapErr(HTTP %d) = %q; it says %q", status, got, word)
			}
		}
	}
}
