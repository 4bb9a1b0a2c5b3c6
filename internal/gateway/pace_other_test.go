//go:build !linux

package gateway_test

import (
	"errors"
	"time"
)

func preciseSleep() (func(time.Duration), error) {
	return nil, errors.New("-gateway.pacer=precise needs Linux; use -gateway.pacer=sleep")
}
