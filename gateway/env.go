package gateway

import (
	"fmt"
	"regexp"
	"strings"
)

// maxEnvValue is Enterprise Gateway's limit for one kernel environment value.
const maxEnvValue = 4096

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// envPolicy filters the environment a client asks a kernel to start with: KERNEL_* names plus the
// configured allow-list; everything else is dropped (as Jupyter Kernel Gateway does).
type envPolicy struct{ allow map[string]bool }

func newEnvPolicy(names []string) envPolicy {
	p := envPolicy{allow: map[string]bool{}}
	for _, n := range names {
		p.allow[n] = true
	}
	return p
}

// filter returns the accepted variables with control characters removed, the names it dropped, and
// an error for a value over the length limit (a clear 400 rather than a silently truncated value).
func (p envPolicy) filter(req map[string]any) (map[string]string, []string, error) {
	out := map[string]string{}
	var dropped []string
	for name, v := range req {
		if !envNameRE.MatchString(name) || !(strings.HasPrefix(name, "KERNEL_") || p.allow[name]) {
			dropped = append(dropped, name)
			continue
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case nil:
			continue
		default:
			s = fmt.Sprint(v)
		}
		if len(s) > maxEnvValue {
			return nil, nil, fmt.Errorf("environment variable %s is %d bytes, the limit is %d", name, len(s), maxEnvValue)
		}
		out[name] = stripControl(s)
	}
	return out, dropped, nil
}

// stripControl drops ASCII control characters (NUL, newlines, escapes, DEL) and C1 controls.
func stripControl(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}
