package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// PCIID writes a PCI device or subsystem ID the one way every detector
// does, so that a node's fingerprint does not change when it moves from
// NVML to nvidia-smi: 8 upper-case hex digits, device then vendor, e.g.
// "233010DE". nvidia-smi prints "233010DE" or "0x233010DE"; NVML gives the
// number. Anything else is "".
func PCIID(s string) string {
	s = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || s == "" {
		return ""
	}
	return PCIIDOf(uint32(v))
}

// PCIIDOf is PCIID of a number.
func PCIIDOf(v uint32) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%08X", v)
}

// MaxVersion bounds the driver and VBIOS versions a detector reports, well
// within what an attestation allows (idlegrid.HardwareFingerprint.Validate).
const MaxVersion = 64

// Version returns a driver or VBIOS version as a fingerprint keeps it:
// trimmed, at most MaxVersion bytes.
func Version(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > MaxVersion {
		s = strings.ToValidUTF8(s[:MaxVersion], "")
	}
	return s
}
