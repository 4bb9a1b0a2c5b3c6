package cli

import (
	"errors"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// inCommandTerms says err in the terms of the command that ran: a field at
// fault that the caller gave as a flag is named as that flag ("--max-price",
// not "job.max_price_micros_per_gpu_hour"), and where what to do next
// depends on the command, the hint says it for that command.
func (e *env) inCommandTerms(err error) error {
	if e.ran == nil {
		return err
	}
	err = e.flagNames(err)
	var h *hintError
	if errors.As(err, &h) {
		return err
	}
	if hint := commandHint(e.ran.Name(), e.objectID(), err); hint != "" {
		return withHint(err, hint)
	}
	return err
}

// objectID is the ID the command that ran was given, when its usage
// begins with one ("idlegrid job get ID"), or "".
func (e *env) objectID() string {
	if len(e.args) == 0 || !strings.HasPrefix(e.ran.help.usage, e.ran.commandPath()+" ID") {
		return ""
	}
	return e.args[0]
}

// flagOfField is the flag that sets each field the server or a check
// names: the job spec's fields whose flag is not the field's own name (a
// field job.X is otherwise flag X, with "-" for "_"), a join token's, a
// dispute's, the agent config's, and the listings' query parameters.
var flagOfField = map[string]string{
	"job.max_price_micros_per_gpu_hour": "max-price",
	"job.max_price":                     "max-price",
	"job.duration_seconds":              "duration",
	"job.checkpoint_every_seconds":      "checkpoint-every",
	"job.gpu_models":                    "gpu-model",
	"job.avoid_providers":               "avoid-provider",
	"job.min_trust_level":               "min-trust-level",
	"job.datasets":                      "dataset",
	"join_token.max_uses":               "max-uses",
	"join_token.ttl_seconds":            "ttl",
	"limit":                             "limit",
	"before":                            "before",
	"after":                             "after",
	"state":                             "state",
	"role":                              "role",
	"region":                            "region",
	"tier":                              "tier",
	"month":                             "month",
	"name":                              "name",
	"gpu_model":                         "gpu-model",
	"min_vram_mb":                       "min-vram-mb",
	"min_free_gpus":                     "min-free-gpus",
	"provider_id":                       "provider",
	"node_id":                           "node",
	"job_id":                            "job",
	"dispute.offence":                   "offence",
	"dispute.provider_id":               "provider",
	"dispute.node_id":                   "node",
	"dispute.lease_id":                  "lease",
	"dispute.renter_id":                 "renter",
	"dispute.harm_micros":               "harm",
	"dispute.evidence":                  "evidence",
	"bond.provider_id":                  "provider",
	"server":                            "server", // the agent config's keys its flags set
	"runtime":                           "runtime",
	"fake_gpus":                         "fake-gpus",
	"data_dir":                          "data",
}

// argOfField is the positional argument, as the commands' usage names
// it, that sets each field the server names: "idlegrid account topup ID
// AMOUNT" sends ID as topup.account_id.
var argOfField = map[string]string{
	"topup.account_id":       "ID",
	"spend_limit.account_id": "ID",
	"spend_limit.key_id":     "ID",
}

// flagOf is the flag that set field, as "--name", when the caller typed
// it on the command line of the command that ran; "" otherwise.
func flagOf(field string, typed map[string]bool) string {
	name, ok := flagOfField[field]
	if !ok && strings.HasPrefix(field, "job.") {
		name = strings.ReplaceAll(strings.TrimPrefix(field, "job."), "_", "-")
	} else if !ok && typed[field] {
		name = field // a check that names the flag it reads ("bad-rows")
	}
	if name != "" && typed[name] {
		return "--" + name
	}
	return ""
}

// typedFlagWrong reports whether err is EINVALID naming a flag of the
// command that ran, one the caller typed wrong or left out (a required
// one): a mistake in the command line, whether this program or the
// server found it. Only this program names a field as a flag, "--image";
// the server's fields are renamed so only when the caller typed the flag.
func (e *env) typedFlagWrong(err error) bool {
	var ie *idlegrid.Error
	if e.ran == nil || !errors.As(err, &ie) || ie.Code != idlegrid.EINVALID {
		return false
	}
	for _, p := range ie.All() {
		if strings.HasPrefix(p.Field, "--") && e.ran.Lookup(strings.TrimPrefix(p.Field, "--")) != nil {
			return true
		}
	}
	return false
}

// flagsAtFault is err, an EINVALID wrapped in whatever words (a config
// file's name), with its fields the caller gave as flags named as those
// flags, when there is one: a mistake in the command line, not in what
// the words name. It is nil when no typed flag is at fault.
func (e *env) flagsAtFault(err error) error {
	var ie *idlegrid.Error
	if !errors.As(err, &ie) {
		return nil
	}
	if named := e.flagNames(ie); e.typedFlagWrong(named) {
		return named
	}
	return nil
}

// flagNames renames the fields of an EINVALID err that the caller gave as
// flags. Only an error as the command returned it, or with a hint, is
// renamed: one wrapped with more words (a job file's name) is about
// something else the caller gave.
func (e *env) flagNames(err error) error {
	inner, hint := err, ""
	if h, ok := err.(*hintError); ok {
		inner, hint = h.err, h.hint
	}
	ie, ok := inner.(*idlegrid.Error)
	if !ok || ie.Code != idlegrid.EINVALID {
		return err
	}
	typed := flagsSet(e.ran)
	ps := ie.All()
	for i, p := range ps {
		f := flagOf(p.Field, typed)
		if name := flagOfField[p.Field]; f == "" && name != "" && strings.HasPrefix(p.Message, "required") && e.ran.Lookup(name) != nil {
			f = "--" + name // a flag this command has, left out
		}
		if arg := argOfField[p.Field]; f == "" && arg != "" && strings.Contains(e.ran.help.usage+" ", " "+arg+" ") {
			f = arg
		}
		if f != "" {
			named := *p
			named.Field = f
			ps[i] = &named
		}
	}
	err = idlegrid.Problems(ps)
	if hint != "" {
		return withHint(err, hint)
	}
	return err
}

// commandHint is what to do next about err from the command (e.g. "bond
// release") given the ID of id, where that depends on the command; ""
// otherwise.
func commandHint(command, id string, err error) string {
	var ie *idlegrid.Error
	switch idlegrid.ErrorCode(err) {
	case idlegrid.EPAYMENT:
		return paymentHint(command)
	case idlegrid.EINVALID:
		return invalidHint(command, err)
	case idlegrid.ECONFLICT:
		if errors.As(err, &ie) && ie.Field == "idempotency_key" {
			return "give another --idempotency-key for another request, or leave it out to have a fresh one made"
		}
		return conflictHint(command, id)
	}
	return ""
}

// invalidHint says to mend what is named, a flag or a field, and where
// the command's flags are described.
func invalidHint(command string, err error) string {
	var ie *idlegrid.Error
	if !errors.As(err, &ie) {
		return ""
	}
	flags, args, what := 0, 0, "field"
	for _, p := range ie.All() {
		if strings.HasPrefix(p.Field, "--") {
			flags++
		} else if p.Field != "" && strings.Trim(p.Field, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "" {
			args++
		}
	}
	switch n := len(ie.All()); {
	case args == n:
		return "fix the argument named above and try again; 'idlegrid help " + command + "' says what it takes"
	case flags == n && n == 1:
		what = "flag"
	case flags == n:
		what = "flags"
	case n > 1:
		what = "fields"
	}
	return "fix the " + what + " named above and try again; 'idlegrid help " + command + "' shows the flags"
}

// paymentHint is what a provider can do about a payment refused for want
// of earnings or bond; "" for a renter's command, which hintFor covers.
func paymentHint(command string) string {
	switch group, _, _ := strings.Cut(command, " "); {
	case command == "bond release":
		return "you can release at most your bond: 'idlegrid account' shows it"
	case group == "bond" || group == "payout":
		return "'idlegrid account' shows your payable and pending earnings; stake or request at most what is payable"
	}
	return ""
}

// stateOf is the command that shows the state of each group's objects,
// with ID where the object's ID goes.
var stateOf = map[string]string{
	"job": "idlegrid job get ID", "lease": "idlegrid lease get ID", "node": "idlegrid node get ID",
	"payout": "idlegrid payout ls", "registry": "idlegrid registry ls", "dispute": "idlegrid dispute show ID",
	"token": "idlegrid token ls", "key": "idlegrid key ls", "account": "idlegrid account show ID",
}

// conflictHint points to the command that shows the state of what the
// command acted on, with its ID when it was given one.
func conflictHint(command, id string) string {
	if command == "bond release" {
		return "a bond is released only while no dispute against you is open; see them with 'idlegrid dispute ls --state open'"
	}
	group, _, _ := strings.Cut(command, " ")
	look, ok := stateOf[group]
	if !ok {
		return ""
	}
	if id != "" {
		look = strings.Replace(look, "ID", id, 1)
	}
	return "it is not in a state that allows this now; see its state with '" + look + "'"
}
