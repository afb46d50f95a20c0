//go:build tools

package tools

import _ "github.com/crossplane/cli/v2/cmd/crossplane"
