// Package examples holds the Terraform modules that create what each
// cloud provider needs; its test checks what berth relies on in them.
package examples

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// berthOwns lists, per Terraform resource type, the attributes berth
// changes at run time: each module must list them in the resource's
// lifecycle ignore_changes, or a later `terraform apply` resets them
// (creating instances, or deleting parked job environments).
var berthOwns = map[string][]string{
	"google_compute_instance_group_manager":        {"target_size", "target_suspended_size"},
	"google_compute_region_instance_group_manager": {"target_size", "target_suspended_size"},
	"aws_autoscaling_group":                        {"desired_capacity"},
	"azurerm_linux_virtual_machine_scale_set":      {"instances"},
}

var (
	resourceHead  = regexp.MustCompile(`(?m)^resource "([^"]+)" "([^"]+)" \{`)
	ignoreChanges = regexp.MustCompile(`ignore_changes\s*=\s*\[([^\]]*)\]`)
)

// TestModulesLeaveBerthsSizesAlone fails when a module's group lets
// Terraform reset a size berth owns (issue 44: the GCP module ignored
// target_size but not target_suspended_size).
func TestModulesLeaveBerthsSizesAlone(t *testing.T) {
	found := 0
	for _, module := range []string{"gcp", "aws", "azure"} {
		b, err := os.ReadFile(module + "/main.tf")
		if err != nil {
			t.Fatal(err)
		}
		for name, body := range resources(string(b)) {
			typ, _, _ := strings.Cut(name, ".")
			owned := berthOwns[typ]
			if owned == nil {
				continue
			}
			found++
			var ignored []string
			if m := ignoreChanges.FindStringSubmatch(body); m != nil {
				for _, a := range strings.Split(m[1], ",") {
					ignored = append(ignored, strings.TrimSpace(a))
				}
			}
			for _, a := range owned {
				if !slices.Contains(ignored, a) {
					t.Errorf("%s/main.tf: %s: lifecycle ignore_changes %v lacks %s, which berth sets: a terraform apply would reset it", module, name, ignored, a)
				}
			}
		}
	}
	if found < 4 {
		t.Errorf("found %d groups in the modules, want 4 (GCP zonal and regional, AWS, Azure): has a resource type changed?", found)
	}
}

// resources returns each resource block's body by "type.name", taken up
// to its matching closing brace.
func resources(tf string) map[string]string {
	out := map[string]string{}
	for _, loc := range resourceHead.FindAllStringSubmatchIndex(tf, -1) {
		depth, start := 0, loc[1]-1
		for i := start; i < len(tf); i++ {
			switch tf[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				out[tf[loc[2]:loc[3]]+"."+tf[loc[4]:loc[5]]] = tf[start : i+1]
				break
			}
		}
	}
	return out
}
