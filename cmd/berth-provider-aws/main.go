// Command berth-provider-aws serves berth's AWS provider (package
// provider/aws: an EC2 Auto Scaling group) as an external provider plugin.
// Install it as berth-provider-aws next to berth, or name it with
// provider_path, and set provider = "aws"; see the README, "Use with AWS".
package main

import (
	"github.com/berth-ci/berth/provider/aws"
	"github.com/berth-ci/berth/sdk"
)

func main() {
	sdk.Serve(aws.New())
}
