// Package power keeps a Jetson in the power mode edgellmd is configured for,
// and reads the machine's telemetry.
//
// What it does:
//
//   - Detect tells whether the machine under a root directory is a Jetson and
//     which one (device-tree model and compatible list, L4T release), reading
//     files only, so tests run on fake trees.
//   - A Controller resolves the configured power mode BY NAME from
//     `nvpmodel -p --verbose`, queries the current one with `nvpmodel -q`, pins
//     it with `nvpmodel -m <id>` (standard input at EOF: it never answers a
//     prompt and never reboots), optionally runs `jetson_clocks`, and with
//     Watch re-checks it every interval, reporting (and, if allowed, undoing)
//     drift. Status is a JSON-ready snapshot for `edgellmd power status`, the
//     status page and the metrics.
//   - Telemetry and Sampler read CPU, memory and load (through gopsutil),
//     thermal zones, the GPU's devfreq node and the INA3221/INA238 power rails
//     from sysfs. A missing file means "not available", never an error.
//
// Resolving the mode name: an exact match wins (case-insensitively); failing
// that, the one mode whose name starts with the configured name and "_" is
// taken, so "MAXN" resolves to MAXN_SUPER (id 2) on an Orin Nano Super and to
// MAXN (id 0) on Thor or AGX Orin. Several candidates, or none, is an error
// that lists the modes the board offers. Ids differ between boards and
// releases and are never assumed.
//
// Mode switches that need a reboot (nvpmodel prints "Reboot required" and asks
// to confirm) are refused with a RebootRequiredError telling the operator what
// to run; edgellmd never reboots a machine. On a machine that is not a Jetson
// every operation is a logged no-op.
//
// What it is not for: choosing a power mode (the config file does), fan
// control, or anything that needs NVML or CUDA.
package power
