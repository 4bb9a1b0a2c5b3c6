package cli

import "strings"

// synonyms are words other tools use for a command idlegrid names
// otherwise: "job list" means "job ls".
var synonyms = map[string][]string{
	"list":   {"ls"},
	"show":   {"get", "show"},
	"get":    {"show", "get"},
	"info":   {"get", "show"},
	"view":   {"get", "show"},
	"delete": {"revoke", "cancel", "logout", "retire"},
	"remove": {"revoke", "cancel", "logout", "retire"},
	"rm":     {"revoke", "cancel", "logout", "retire"},
	"kill":   {"cancel"},
	"stop":   {"cancel"},
	"new":    {"create", "submit"},
	"add":    {"create", "submit", "add"},
	"run":    {"submit"},
	"follow": {"watch"},
	"tail":   {"logs"},
	"log":    {"logs"},
}

// suggest is the name among names that the caller most likely meant by
// typed: a synonym idlegrid uses instead, the one name that typed begins
// (or that begins typed), or the nearest within a typo or two; "" when
// none is near enough to offer.
func suggest(typed string, names []string) string {
	t := strings.ToLower(strings.TrimLeft(typed, "-"))
	if t == "" {
		return ""
	}
	for _, s := range synonyms[t] {
		for _, n := range names {
			if n == s {
				return n
			}
		}
	}
	var prefixed []string
	for _, n := range names {
		if len(t) >= 2 && (strings.HasPrefix(n, t) || strings.HasPrefix(t, n) && len(n) >= 3) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestDist := "", 0
	for _, n := range names {
		d := editDistance(t, n)
		if d > max(1, min(2, len(n)/3)) || d >= len(n) {
			continue
		}
		if best == "" || d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// isID reports whether s looks like the ID of one of the market's objects
// ("job_1k8u…", "acct_…").
func isID(s string) bool {
	for _, k := range idKinds {
		if strings.HasPrefix(s, k.prefix) && len(s) > len(k.prefix) {
			return true
		}
	}
	return false
}

// didYouMean is "; did you mean X?" with X the suggestion for typed among
// names, written by form (which gets the name), or "" when there is none.
func didYouMean(typed string, names []string, form func(string) string) string {
	if s := suggest(typed, names); s != "" {
		return "; did you mean " + form(s) + "?"
	}
	return ""
}

// thenSep is what goes between a message that may end with didYouMean's
// question and the clause that follows it.
func thenSep(msg string) string {
	if strings.HasSuffix(msg, "?") {
		return " "
	}
	return "; "
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of two neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
