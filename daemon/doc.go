// Package daemon owns edgellmd's long-lived objects and their lifecycle: the
// logger, configuration, start order, systemd notification and signals. Other
// packages never import it; it builds their objects and hands them what they
// need.
package daemon
