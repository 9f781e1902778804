package power

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/nvpmodel", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The answers in testdata/nvpmodel/query are real `nvpmodel -q` outputs
// (testdata/README.md names where each was published).
func TestParseQuery(t *testing.T) {
	tests := []struct {
		file string
		want PowerMode
	}{
		{"query/thor-maxn.txt", PowerMode{0, "MAXN"}},
		{"query/orin-jp6-maxn.txt", PowerMode{0, "MAXN"}},
		{"query/orin-nano-super.txt", PowerMode{2, "MAXN_SUPER"}},
		{"query/xavier-fan-cool.txt", PowerMode{5, "MODE_30W_4CORE"}},
		{"query/xavier-nx-nonroot.txt", PowerMode{7, "MODE_15W_DESKTOP"}},
		{"query/xavier-nx-verbose.txt", PowerMode{2, "MODE_15W_6CORE"}},
		{"query/warn-fan-not-set.txt", PowerMode{0, "MAXN"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := parseQuery(readTestdata(t, tt.file))
			if err != nil || got != tt.want {
				t.Errorf("parseQuery = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{
		"",
		"nvpmodel: command not found",
		"NV Power Mode: MAXN\n",
		"NV Power Mode: MAXN\nNVPM ERROR: something\n",
		"NV Power Mode: \n0\n",
	} {
		if got, err := parseQuery(bad); err == nil {
			t.Errorf("parseQuery(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestParseModes(t *testing.T) {
	tests := []struct {
		board string
		want  modeList
	}{
		{"thor-agx", modeList{
			Modes:   []PowerMode{{0, "MAXN"}, {1, "120W"}, {2, "90W"}, {3, "70W"}},
			Default: &PowerMode{1, "120W"},
		}},
		{"orin-nano-super", modeList{
			Modes:   []PowerMode{{0, "15W"}, {1, "25W"}, {2, "MAXN_SUPER"}, {3, "7W"}},
			Default: &PowerMode{1, "25W"},
		}},
		{"agx-orin", modeList{
			Modes:   []PowerMode{{0, "MAXN"}, {1, "MODE_15W"}, {2, "MODE_30W"}, {3, "MODE_50W"}},
			Default: &PowerMode{2, "MODE_30W"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.board, func(t *testing.T) {
			got, err := parseModes(readTestdata(t, tt.board+"/p-verbose.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseModes = %+v (default %+v)\nwant %+v (default %+v)", got.Modes, got.Default, tt.want.Modes, tt.want.Default)
			}
		})
	}
	if _, err := parseModes("NVPM ERROR: Error opening /etc/nvpmodel.conf\n"); err == nil {
		t.Error("parseModes of an output with no POWER_MODEL line: want an error")
	}
	if _, err := parseModes("POWER_MODEL: ID=0 NAME=MAXN\nPOWER_MODEL: ID=0 NAME=OTHER\n"); err == nil {
		t.Error("parseModes with a duplicated id: want an error")
	}
}

func TestResolveMode(t *testing.T) {
	thor := []PowerMode{{0, "MAXN"}, {1, "120W"}, {2, "90W"}, {3, "70W"}}
	nanoSuper := []PowerMode{{0, "15W"}, {1, "25W"}, {2, "MAXN_SUPER"}, {3, "7W"}}
	// AGX Orin 32GB gains a MAXN_SUPER mode next to MAXN from R39 on.
	both := []PowerMode{{0, "MAXN"}, {1, "MODE_15W"}, {4, "MAXN_SUPER"}}
	tests := []struct {
		name  string
		modes []PowerMode
		want  PowerMode
		err   string // substring of the error, "" for none
	}{
		{"MAXN", thor, PowerMode{0, "MAXN"}, ""},
		{"maxn", thor, PowerMode{0, "MAXN"}, ""},
		{" MAXN ", thor, PowerMode{0, "MAXN"}, ""},
		{"120W", thor, PowerMode{1, "120W"}, ""},
		{"MAXN", nanoSuper, PowerMode{2, "MAXN_SUPER"}, ""},
		{"MAXN_SUPER", nanoSuper, PowerMode{2, "MAXN_SUPER"}, ""},
		{"MAXN", both, PowerMode{0, "MAXN"}, ""},
		{"MAXN_SUPER", both, PowerMode{4, "MAXN_SUPER"}, ""},
		{"MAXN", []PowerMode{{0, "MAXN_A"}, {1, "MAXN_B"}}, PowerMode{}, "ambiguous"},
		{"MAXNX", thor, PowerMode{}, "not one of this board's modes: MAXN (id 0), 120W (id 1), 90W (id 2), 70W (id 3)"},
		{"MAX", thor, PowerMode{}, "not one of"},
		{"30W", nanoSuper, PowerMode{}, "not one of"},
		{"", thor, PowerMode{}, "empty"},
	}
	for _, tt := range tests {
		got, err := resolveMode(tt.name, tt.modes)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("resolveMode(%q) = %+v, %v; want %+v", tt.name, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("resolveMode(%q) = %+v, %v; want an error containing %q", tt.name, got, err, tt.err)
		}
	}
}

func TestNeedsReboot(t *testing.T) {
	tests := []struct {
		file string
		want bool
	}{
		{"set/thor-reboot.txt", true},
		{"set/orin-reboot-golden.txt", true},
		{"set/error-permission.txt", false},
		{"query/thor-maxn.txt", false},
	}
	for _, tt := range tests {
		if got := needsReboot(readTestdata(t, tt.file)); got != tt.want {
			t.Errorf("needsReboot(%s) = %v, want %v", tt.file, got, tt.want)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, name := range []string{"thor-maxn", "orin-jp6-maxn", "xavier-nx-nonroot", "xavier-nx-verbose"} {
		f.Add(readTestdata(f, "query/"+name+".txt"))
	}
	f.Fuzz(func(t *testing.T, out string) {
		m, err := parseQuery(out)
		if err == nil && (m.Name == "" || m.ID < 0 || strings.ContainsAny(m.Name, " \t\n")) {
			t.Errorf("parseQuery(%q) = %+v without error", out, m)
		}
	})
}

func FuzzParseModes(f *testing.F) {
	f.Add(readTestdata(f, "thor-agx/p-verbose.txt"))
	f.Add("NVPM VERB: PM_CONFIG: DEFAULT=MAXN(0)\nNVPM VERB: POWER_MODEL: ID=0 NAME=MAXN\n")
	f.Fuzz(func(t *testing.T, out string) {
		l, err := parseModes(out)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, m := range l.Modes {
			if m.Name == "" || m.ID < 0 || seen[m.ID] {
				t.Errorf("parseModes(%q) gave mode %+v", out, m)
			}
			seen[m.ID] = true
		}
	})
}
