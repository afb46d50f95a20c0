// Command inconstraints judges a package's spec.crossplane.version the way the
// package manager of the pinned Crossplane core does: the revision reconciler
// lints each package with xpkg.PackageCrossplaneCompatible, which asks
// version.Versioner.InConstraints of crossplane-runtime (Masterminds/semver).
// That versioner reads the core's version from the variable
// scripts/setup.sh stamps with -ldflags -X; stamp this program the same way:
//
//	go run -ldflags=-X=github.com/crossplane/crossplane-runtime/v2/pkg/version.version=v2.3.4 \
//	  ./inconstraints '>=v2.3.4-0' '>=v2.0.0'
//
// It prints true or false for each constraint, one a line, or exits 2 when the
// version or a constraint does not parse (the package manager then refuses the
// package too). tests/validation/test_crossplane_constraint.py runs it.
package main

import (
	"fmt"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/version"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: inconstraints <constraint>...")
		os.Exit(2)
	}
	v := version.New()
	for _, constraint := range os.Args[1:] {
		in, err := v.InConstraints(constraint)
		if err != nil {
			fmt.Fprintf(os.Stderr, "inconstraints: %q: %v\n", constraint, err)
			os.Exit(2)
		}
		fmt.Println(in)
	}
}
