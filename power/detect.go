package power

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Files Detect reads, relative to the root it is given.
const (
	tegraReleaseFile = "etc/nv_tegra_release"
	dtModelFile      = "proc/device-tree/model"
	dtCompatibleFile = "proc/device-tree/compatible"
	// /proc/device-tree is a link to this; read it when /proc is not mounted
	// (a container with /sys but a private /proc).
	sysDTModelFile      = "sys/firmware/devicetree/base/model"
	sysDTCompatibleFile = "sys/firmware/devicetree/base/compatible"
)

// Board says what machine Detect found.
type Board struct {
	Jetson bool `json:"jetson"`
	// Model is the device-tree model, e.g. "NVIDIA Jetson AGX Thor Developer Kit".
	Model string `json:"model,omitempty"`
	// Compatible is the device-tree compatible list, most specific first,
	// e.g. ["nvidia,p4071-0000+p3834-0008", "nvidia,p3834-0008", "nvidia,tegra264"].
	Compatible []string `json:"compatible,omitempty"`
	// SoC is the Tegra chip from the compatible list, e.g. "tegra264".
	SoC string `json:"soc,omitempty"`
	// Family names the SoC's product line: "Thor", "Orin", "Xavier", ...
	Family string `json:"family,omitempty"`
	// L4T is the Jetson Linux release from /etc/nv_tegra_release, e.g. "38.2.0".
	L4T string `json:"l4t,omitempty"`
}

// tegraFamilies maps the compatible entry of each Jetson SoC to its product line.
var tegraFamilies = map[string]string{
	"tegra264": "Thor",
	"tegra234": "Orin",
	"tegra194": "Xavier",
	"tegra186": "TX2",
	"tegra210": "TX1/Nano",
}

var tegraSoC = regexp.MustCompile(`^nvidia,(tegra[0-9]+)$`)

// "# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64, DATE: ..."
var tegraReleaseLine = regexp.MustCompile(`^# R([0-9]+) \(release\), REVISION: ([0-9]+(?:\.[0-9]+)*)`)

// Detect reads the Jetson identification files under root ("/" on a device).
// A machine is a Jetson when its device-tree compatible list names an
// nvidia,tegraNNN SoC. Missing files are not errors (a PC has none of them);
// an unreadable file or an /etc/nv_tegra_release whose first line is not in
// L4T's format is.
func Detect(root string) (Board, error) {
	var b Board
	model, err := readFirstOf(root, dtModelFile, sysDTModelFile)
	if err != nil {
		return Board{}, err
	}
	b.Model = strings.TrimSpace(strings.TrimRight(string(model), "\x00"))

	compat, err := readFirstOf(root, dtCompatibleFile, sysDTCompatibleFile)
	if err != nil {
		return Board{}, err
	}
	for _, c := range bytes.Split(compat, []byte{0}) {
		if s := strings.TrimSpace(string(c)); s != "" {
			b.Compatible = append(b.Compatible, s)
		}
	}
	for _, c := range b.Compatible {
		if m := tegraSoC.FindStringSubmatch(c); m != nil {
			b.Jetson = true
			b.SoC = m[1]
			b.Family = tegraFamilies[m[1]]
			break
		}
	}

	rel, err := os.ReadFile(filepath.Join(root, tegraReleaseFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Board{}, fmt.Errorf("detect jetson: %w", err)
	default:
		l4t, err := parseTegraRelease(rel)
		if err != nil {
			return Board{}, fmt.Errorf("detect jetson: %s: %w", filepath.Join(root, tegraReleaseFile), err)
		}
		b.L4T = l4t
	}
	return b, nil
}

// parseTegraRelease turns the first line of /etc/nv_tegra_release into a
// release number: "# R36 (release), REVISION: 4.3, ..." is "36.4.3".
func parseTegraRelease(data []byte) (string, error) {
	first, _, _ := strings.Cut(string(data), "\n")
	m := tegraReleaseLine.FindStringSubmatch(strings.TrimSpace(first))
	if m == nil {
		return "", fmt.Errorf("first line %q is not \"# R<major> (release), REVISION: <minor>.<patch>, ...\"", first)
	}
	return m[1] + "." + m[2], nil
}

// readFirstOf returns the contents of the first of names (relative to root)
// that exists, or nil when none does.
func readFirstOf(root string, names ...string) ([]byte, error) {
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("detect jetson: %w", err)
		}
		return data, nil
	}
	return nil, nil
}
