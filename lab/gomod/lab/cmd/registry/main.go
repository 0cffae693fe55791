// Command registry is the lab's OCI registry: distribution/v3's own registry command with only the
// storage drivers and auth the lab uses (filesystem and in-memory storage, htpasswd auth), so a cold
// build does not compile the Azure, GCS and S3 SDKs that upstream's cmd/registry links in.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// RootCmd reports its own errors and exits non-zero on failure (as upstream's main relies on)
	_ = registry.RootCmd.Execute()
}
