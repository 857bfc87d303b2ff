// Command imagebuild writes the image archives of `make images` from the
// static binaries `make build` left in a directory.
//
//	go run ./tests/images/cmd/imagebuild -bin bin -out bin/images -tag dev -revision "$(git rev-parse HEAD)"
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eurekube/eurekube/tests/images"
)

func main() {
	var opts images.Options
	flag.StringVar(&opts.BinDir, "bin", "bin", "directory holding one static binary per image")
	flag.StringVar(&opts.OutDir, "out", "bin/images", "directory receiving <name>.tar per image")
	flag.StringVar(&opts.Tag, "tag", "dev", "tag of every image (eurekube/<name>:<tag>) and its version label")
	flag.StringVar(&opts.Revision, "revision", "", "git commit of the binaries (org.opencontainers.image.revision)")
	flag.StringVar(&opts.CABundle, "ca-bundle", images.DefaultCABundle, "PEM CA bundle installed in every image")
	flag.Parse()
	archives, err := images.WriteAll(images.All(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
	for _, a := range archives {
		fmt.Printf("%s\t%s\t%s\n", a.Path, a.Ref, a.Digest)
	}
}
