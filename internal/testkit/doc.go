// Package testkit holds no code: its subpackages are the rigs the tests and
// benchmarks use, never imported by the program. The program's own helpers
// are internal's other packages; its entry code is cmd/brokernet/internal/cli.
//
//   - testbroker: real ActiveMQ brokers and RabbitMQ nodes on free ports
//     (testdata/activemq.sh, testdata/rabbitmq.sh), their statistics and logs.
//   - jmstest: ActiveMQ's own JMS client (the Java programs beside it) as
//     producer, consumer, requester and responder.
//   - stomptest, amqptest: producers and consumers over STOMP and AMQP 1.0
//     that count by sequence number.
//   - faultproxy: a TCP proxy that cuts at a frame, holds a black hole, adds
//     latency or limits bandwidth.
//   - tlstest: throw-away certificates and a fake TLS server.
//   - netsim: the demand rules simulated over large networks (make scale-sim).
//   - bench, scale: the benchmarks and soak run (make bench, make soak) and
//     the scale runs (make scale-daemon, make scale).
package testkit
