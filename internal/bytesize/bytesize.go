// Package bytesize formats byte counts for people, as logs, job traces and
// error messages show sizes and limits.
package bytesize

import "fmt"

// Format prints n bytes in binary units with one decimal: "512 B",
// "1.5 KiB", "3.0 GiB".
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
