package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// confirm asks, on a terminal, the question about what the command has
// just said it would do, and goes on only on y or yes; declined is the
// error otherwise. Elsewhere (a script, a pipe) there is no one to ask: it
// refuses with refusal, a usage error that says to give --yes.
func (e *env) confirm(question, refusal, declined string) error {
	if !isTerminal(e.Err) || !isTerminalIn(e.In) {
		return usagef("%s", refusal)
	}
	fmt.Fprintf(e.Err, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(e.In).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New(declined)
	}
	return nil
}
