package amqp

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
)

// A RabbitMQ broker's AMQP 1.0 connections carry no consumer advisories, and
// its event exchange's messages carry no data over AMQP 1.0 (RabbitMQ 3.10):
// its demand is read over its STOMP plugin (rabbitmq/events, over
// transport/stomp's connections), whatever protocol carries the messages.

var _ transport.DemandEndpoint = URI{}

// DemandSource returns the demand source of the RabbitMQ broker u names: its
// event exchange, read over STOMP on the same host, port StompPort (default
// 61613), with u's credentials, vhost, management URL and back-off. It does
// not connect.
func (u URI) DemandSource(log zerolog.Logger) (transport.DemandSource, error) {
	su, err := u.eventsURI()
	if err != nil {
		return nil, err
	}
	return su.DemandSource(log)
}

// eventsURI is the STOMP address of the same RabbitMQ broker, where its
// demand (the event exchange) is read.
func (u URI) eventsURI() (stomp.URI, error) {
	host := u.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	su, err := stomp.ParseURI("stomp://" + host + ":" + strconv.Itoa(cmp.Or(u.StompPort, stomp.DefaultPort)))
	if err != nil {
		return su, err
	}
	su.Login, su.Passcode = u.User, u.Password
	if u.VHost != "" {
		su.VHost = u.VHost
	}
	su.Management = u.Management
	su.Flavour = stomp.RabbitMQ
	su.Reconnect = u.Reconnect
	return su, nil
}
