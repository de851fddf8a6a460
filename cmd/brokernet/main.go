// Command brokernet links message brokers into a network with demand-forwarding bridges.
package main

import (
	"os"

	"github.com/brokernet/brokernet/cmd/brokernet/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
