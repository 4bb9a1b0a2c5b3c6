package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/idlegrid/idlegrid/internal/cli.Version=v1.2.3".
var Version = "dev"

// versionCommand is "idlegrid version".
type versionCommand struct{ env *env }

func (c *versionCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("version", help{usage: "idlegrid version", about: "Print the version of this binary."})
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "idlegrid %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// versionString is Version plus the VCS revision when the build recorded one.
func versionString() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}
