package cli

import (
	"flag"
	"fmt"
	"strings"
)

// noneListed says that a listing found nothing, and under which of the
// filters the caller typed, rather than print a bare header: "no jobs to
// list yet" (with next, what makes one, when given), "no job matches
// --state failed", or "no more jobs before job_x" for a page past the
// last. one and many name the listing's objects ("job", "jobs").
func (e *env) noneListed(one, many, next string) error {
	var filters []string
	cursor := ""
	e.ran.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr", "key", "json", "csv", "limit", "oldest", "all":
		case "before", "after":
			cursor = f.Name + " " + f.Value.String()
		default:
			v := f.Value.String()
			if g, ok := f.Value.(flag.Getter); ok {
				if b, ok := g.Get().(bool); ok {
					if b {
						filters = append(filters, "--"+f.Name)
					}
					return
				}
			}
			filters = append(filters, "--"+f.Name+" "+quoteArg(v))
		}
	})
	var err error
	switch flags := strings.Join(filters, " "); {
	case cursor != "":
		_, err = fmt.Fprintf(e.Out, "no more %s %s%s\n", many, cursor, strings.TrimRight(" "+flags, " "))
	case flags != "":
		_, err = fmt.Fprintf(e.Out, "no %s matches %s\n", one, flags)
	case next != "":
		_, err = fmt.Fprintf(e.Out, "no %s to list yet (%s)\n", many, next)
	default:
		_, err = fmt.Fprintf(e.Out, "no %s to list yet\n", many)
	}
	return err
}

// quoteArg is v as a shell argument: as it is when it needs no quotes.
func quoteArg(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n'\"\\$`;&|<>()*?[]#~") {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
