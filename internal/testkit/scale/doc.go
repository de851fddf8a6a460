// Package scale measures brokernet on real brokers at the sizes issue 12 asks
// about: one federation daemon holding many connectors (make scale-daemon) and
// a network of brokers with a sidecar each, joined by gossip (make scale). Its
// tests run only when their flags ask for them: they start many JVMs and take
// minutes.
package scale
