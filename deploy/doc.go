// Package deploy holds the deployment files (systemd unit, Kubernetes
// manifests, container image); its tests check them with the tools that read
// them.
package deploy
